// Starts a private RabbitMQ node on loopback, with its own epmd, cookie, data and logs,
// and a `matchd` vhost whose default queue type is quorum (the contract depends on it).
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { connect } from "amqplib";
import {
  BASE_ENV,
  childrenNamed,
  type DetachedChild,
  findBinary,
  freePorts,
  processStartTicks,
  type RecordedProcess,
  SETUP_HINT,
  StackError,
  spawnDetached,
  stopProcesses,
  waitUntil,
} from "./process";

/** The size at which a node's quorum-queue WAL rolls over and its memory table is freed. */
export const brokerWalMaxBytes = 64_000_000;

/** The largest message the stack's broker accepts (see rabbitmq.conf below). */
export const brokerMaxMessageBytes = 16 * 1024 * 1024;

/** The script in /usr/lib, not the /usr/sbin wrapper, which switches to the rabbitmq user as root. */
export const RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server";
export const RABBITMQ_CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl";
export const VHOST = "matchd";

/** amqplib keeps the broker's connection.start properties here; its types leave them out. */
interface ServedConnection {
  connection: { serverProperties: Record<string, unknown> };
}

export interface RunningRabbitmq {
  url: string;
  nodename: string;
  nodePort: number;
  distPort: number;
  epmdPort: number;
  /** The env under which rabbitmqctl reaches this node (for debugging by hand). */
  ctlEnv: Record<string, string>;
  logFiles: string[];
  processes: RecordedProcess[];
}

/**
 * RabbitMQ's sha256 password hash: base64(salt ++ sha256(salt ++ password)). Boot-time
 * definitions replace the default user, so guest has to be defined here explicitly.
 */
function passwordHash(password: string): string {
  const salt = randomBytes(4);
  const digest = createHash("sha256")
    .update(Buffer.concat([salt, Buffer.from(password, "utf8")]))
    .digest();
  return Buffer.concat([salt, digest]).toString("base64");
}

export function definitions(): string {
  const all = { configure: ".*", write: ".*", read: ".*" };
  return JSON.stringify(
    {
      users: [
        {
          name: "guest",
          password_hash: passwordHash("guest"),
          hashing_algorithm: "rabbit_password_hashing_sha256",
          tags: ["administrator"],
        },
      ],
      // Created at boot from definitions rather than by two rabbitmqctl calls (each
      // starts an Erlang VM, ~0.6 s of CPU); measured on 3.10.8 to honour the metadata.
      vhosts: [{ name: "/" }, { name: VHOST, metadata: { default_queue_type: "quorum" } }],
      permissions: [
        { user: "guest", vhost: "/", ...all },
        { user: "guest", vhost: VHOST, ...all },
      ],
    },
    null,
    2,
  );
}

export function tcpOpen(port: number): Promise<boolean | undefined> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: "127.0.0.1", port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", reject);
  });
}

/** The files and directories every node needs: its logs, its data and an empty plugin list. */
export function writeNodeFiles(dir: string, confLines: string[]): void {
  mkdirSync(`${dir}/mnesia`, { recursive: true });
  mkdirSync(`${dir}/log`, { recursive: true });
  writeFileSync(`${dir}/rabbitmq.conf`, [...confLines, ""].join("\n"));
  writeFileSync(`${dir}/rabbitmq-env.conf`, "");
  writeFileSync(`${dir}/enabled_plugins`, "[].\n");
}

/**
 * The rabbitmq.conf lines every node of the stack has: loopback only, the message size bound
 * the contract relies on, and the quorum queues' in-memory WAL table bound.
 */
export function baseConfLines(nodePort: number): string[] {
  return [
    `listeners.tcp.default = 127.0.0.1:${nodePort}`,
    // The inter-node (distribution) port would otherwise listen on every interface,
    // guarded only by the cookie.
    "distribution.listener.interface = 127.0.0.1",
    // A command takes 2 KiB at most; a consumer holds a message about three times over
    // while it receives and dead-letters it, so the broker refuses anything above 16 MiB
    // at publish (its default is 128 MiB) and no consumer ever has to hold one.
    `max_message_size = ${brokerMaxMessageBytes}`,
    // Quorum queues keep every entry of the current WAL file in memory until it rolls over:
    // 512 MiB by default, so at 2,000 commands/s the broker grew by ~800 MB in a soak with
    // its queues empty. 64 MB bounds it, at a segment flush every ~40 s at that rate.
    `raft.wal_max_size_bytes = ${brokerWalMaxBytes}`,
  ];
}

/** The environment a node runs under, which rabbitmqctl also needs to reach it. */
export function nodeEnv({
  dir,
  home,
  nodename,
  nodePort,
  distPort,
  epmdPort,
}: {
  dir: string;
  home: string;
  nodename: string;
  nodePort: number;
  distPort: number;
  epmdPort: number;
}): Record<string, string> {
  return {
    ...BASE_ENV,
    HOME: home,
    RABBITMQ_NODENAME: nodename,
    RABBITMQ_NODE_IP_ADDRESS: "127.0.0.1",
    RABBITMQ_NODE_PORT: String(nodePort),
    RABBITMQ_DIST_PORT: String(distPort),
    ERL_EPMD_ADDRESS: "127.0.0.1",
    ERL_EPMD_PORT: String(epmdPort),
    RABBITMQ_MNESIA_BASE: `${dir}/mnesia`,
    RABBITMQ_LOG_BASE: `${dir}/log`,
    RABBITMQ_CONFIG_FILE: `${dir}/rabbitmq.conf`,
    RABBITMQ_ADVANCED_CONFIG_FILE: `${dir}/advanced.config`,
    RABBITMQ_CONF_ENV_FILE: `${dir}/rabbitmq-env.conf`,
    RABBITMQ_ENABLED_PLUGINS_FILE: `${dir}/enabled_plugins`,
    RABBITMQ_PID_FILE: `${dir}/rabbitmq.pid`,
    // Unbound schedulers: RabbitMQ pins each scheduler thread to its own core, and where
    // Valkey and matchd share those cores a pinned scheduler waits for its one core while
    // the other may be idle. Unbound, the outbox drain ran ~6.6 % faster (median, README).
    RABBITMQ_SCHEDULER_BIND_TYPE: "u",
  };
}

/**
 * Starts a private epmd in the foreground, so its pid is ours to record and stop. Erlang
 * would otherwise start a daemonized epmd that outlives the node with no owner, or share
 * the system one on 4369 that runs as another user.
 */
export async function startEpmd({
  dir,
  port,
  env,
  record,
}: {
  dir: string;
  port: number;
  env: Record<string, string>;
  record: (spawned: RecordedProcess) => void;
}): Promise<void> {
  const epmd = findBinary("epmd");
  if (epmd === undefined) {
    throw new StackError("missing-binary", `epmd not found: ${SETUP_HINT}`);
  }
  const epmdLog = `${dir}/epmd.log`;
  const child = spawnDetached(epmd, ["-port", String(port), "-address", "127.0.0.1"], {
    env,
    logFile: epmdLog,
    cwd: dir,
  });
  record({
    name: "epmd",
    pid: child.pid,
    startTicks: processStartTicks(child.pid) ?? 0,
    group: true,
  });
  await waitUntil({
    what: `epmd on port ${port}`,
    child,
    timeoutMs: 10_000,
    intervalMs: 20,
    logs: [epmdLog],
    probe: () => tcpOpen(port),
  });
}

export interface SpawnedNode {
  server: DetachedChild;
  stdoutLog: string;
  nodeLog: string;
}

/**
 * Spawns rabbitmq-server and returns once its beam.smp exists. The script stays as a
 * parent shell that forwards SIGTERM to the beam.smp it runs in the background; both are
 * recorded (as `name` and `name`-beam) so that nothing is left behind either way.
 */
export async function spawnNode({
  dir,
  env,
  name,
  record,
}: {
  dir: string;
  env: Record<string, string>;
  name: string;
  record: (spawned: RecordedProcess) => void;
}): Promise<SpawnedNode> {
  const stdoutLog = `${dir}/stdout.log`;
  const nodeLog = `${dir}/log/${env.RABBITMQ_NODENAME}.log`;
  const server = spawnDetached(RABBITMQ_SERVER, [], { env, logFile: stdoutLog, cwd: dir });
  record({
    name,
    pid: server.pid,
    startTicks: processStartTicks(server.pid) ?? 0,
    group: true,
  });
  const beamPid = await waitUntil({
    what: `${name} beam.smp process`,
    child: server,
    timeoutMs: 10_000,
    intervalMs: 20,
    logs: [stdoutLog],
    probe: async () => childrenNamed(server.pid, "beam.smp")[0],
  });
  record({
    name: `${name}-beam`,
    pid: beamPid,
    startTicks: processStartTicks(beamPid) ?? 0,
    group: false,
  });
  return { server, stdoutLog, nodeLog };
}

/**
 * Waits until an AMQP channel opens on the vhost at `url` and the answer comes from
 * `nodename`: the port was free when picked but released before the node bound it. The
 * node's cluster name, unless someone sets one, is its own name with the machine's host
 * name, so its part before the "@" names the node that answered.
 */
export async function waitForAmqp({
  url,
  nodename,
  node,
  timeoutMs,
  stopped,
}: {
  url: string;
  nodename: string;
  node: SpawnedNode;
  timeoutMs: number;
  stopped?: () => string | undefined;
}): Promise<void> {
  await waitUntil({
    what: `rabbitmq node ${nodename}`,
    child: node.server,
    timeoutMs,
    intervalMs: 200,
    logs: [node.stdoutLog, node.nodeLog],
    ...(stopped === undefined ? {} : { stopped }),
    probe: async () => {
      const connection = await connect(url);
      // amqplib emits 'error' on a socket error or a fatal close: unheard, it would end the
      // process before the failed start could stop what it started.
      connection.on("error", () => undefined);
      try {
        const served = (connection as unknown as ServedConnection).connection.serverProperties
          .cluster_name;
        if (typeof served !== "string" || served.split("@")[0] !== nodename.split("@")[0]) {
          throw new Error(`${url} is served by ${String(served)}, not ${nodename}`);
        }
        await connection.createChannel();
        return true;
      } finally {
        await connection.close();
      }
    },
  });
}

/** Starts epmd and the node, and waits until an AMQP channel opens on the vhost. */
export async function startRabbitmq({
  dir,
  readyTimeoutMs = 60_000,
  log = () => {},
  onSpawn = () => {},
  ports,
}: {
  dir: string;
  readyTimeoutMs?: number;
  log?: (line: string) => void;
  /** Called as soon as each process exists, so a caller can record it before readiness. */
  onSpawn?: (spawned: RecordedProcess) => void;
  /** AMQP, distribution and epmd ports, reserved by the caller with all the stack's others. */
  ports?: [number, number, number];
}): Promise<RunningRabbitmq> {
  if (findBinary(RABBITMQ_SERVER) === undefined || findBinary("epmd") === undefined) {
    throw new StackError(
      "missing-binary",
      `${RABBITMQ_SERVER} or epmd not found: install Debian package rabbitmq-server, or ${SETUP_HINT}`,
    );
  }
  const home = `${dir}/home`;
  mkdirSync(home, { recursive: true });
  // The node and rabbitmqctl authenticate to each other with this cookie; a private one
  // keeps them from ever talking to another node on the machine.
  writeCookie(home);
  const [nodePort, distPort, epmdPort] = (ports ?? (await freePorts(3))) as [
    number,
    number,
    number,
  ];
  const nodename = `matchd-${randomBytes(4).toString("hex")}@localhost`;
  writeFileSync(`${dir}/definitions.json`, definitions());
  // No loopback_users line: guest keeps its default restriction to loopback connections,
  // which is all this node accepts anyway.
  writeNodeFiles(dir, [...baseConfLines(nodePort), `load_definitions = ${dir}/definitions.json`]);
  const env = nodeEnv({ dir, home, nodename, nodePort, distPort, epmdPort });
  const processes: RecordedProcess[] = [];
  const record = (spawned: RecordedProcess) => {
    processes.push(spawned);
    onSpawn(spawned);
  };
  const stopAll = () => stopProcesses([...processes].reverse(), 15_000, dir);

  try {
    await startEpmd({ dir, port: epmdPort, env, record });
    const node = await spawnNode({ dir, env, name: "rabbitmq", record });
    log(`rabbitmq: node ${nodename} starting on 127.0.0.1:${nodePort}`);
    const url = `amqp://guest:guest@127.0.0.1:${nodePort}/${VHOST}`;
    await waitForAmqp({ url, nodename, node, timeoutMs: readyTimeoutMs });
    return {
      url,
      nodename,
      nodePort,
      distPort,
      epmdPort,
      ctlEnv: env,
      logFiles: [node.stdoutLog, node.nodeLog],
      processes,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** A fresh private Erlang cookie in `home`, which only this stack's nodes and CLI read. */
export function writeCookie(home: string): void {
  writeFileSync(`${home}/.erlang.cookie`, randomBytes(15).toString("hex").toUpperCase(), {
    mode: 0o600,
  });
}
