// Starts a private RabbitMQ node on loopback, with its own epmd, cookie, data and logs,
// and a `matchd` vhost whose default queue type is quorum (the contract depends on it).
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { connect } from "amqplib";
import {
  BASE_ENV,
  childrenNamed,
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

/** The largest message the stack's broker accepts (see rabbitmq.conf below). */
export const brokerMaxMessageBytes = 16 * 1024 * 1024;

/** The script in /usr/lib, not the /usr/sbin wrapper, which switches to the rabbitmq user as root. */
export const RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server";
export const RABBITMQ_CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl";
const VHOST = "matchd";

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

function definitions(): string {
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

function tcpOpen(port: number): Promise<boolean | undefined> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: "127.0.0.1", port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", reject);
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
  const epmd = findBinary("epmd");
  if (findBinary(RABBITMQ_SERVER) === undefined || epmd === undefined) {
    throw new StackError(
      "missing-binary",
      `${RABBITMQ_SERVER} or epmd not found: install Debian package rabbitmq-server, or ${SETUP_HINT}`,
    );
  }
  const home = `${dir}/home`;
  const logBase = `${dir}/log`;
  mkdirSync(home, { recursive: true });
  mkdirSync(`${dir}/mnesia`, { recursive: true });
  mkdirSync(logBase, { recursive: true });
  // The node and rabbitmqctl authenticate to each other with this cookie; a private one
  // keeps them from ever talking to another node on the machine.
  writeFileSync(`${home}/.erlang.cookie`, randomBytes(15).toString("hex").toUpperCase(), {
    mode: 0o600,
  });
  const [nodePort, distPort, epmdPort] = (ports ?? (await freePorts(3))) as [
    number,
    number,
    number,
  ];
  const nodename = `matchd-${randomBytes(4).toString("hex")}@localhost`;
  writeFileSync(`${dir}/definitions.json`, definitions());
  // No loopback_users line: guest keeps its default restriction to loopback connections,
  // which is all this node accepts anyway.
  writeFileSync(
    `${dir}/rabbitmq.conf`,
    [
      `listeners.tcp.default = 127.0.0.1:${nodePort}`,
      // The inter-node (distribution) port would otherwise listen on every interface,
      // guarded only by the cookie; this node never has peers.
      "distribution.listener.interface = 127.0.0.1",
      `load_definitions = ${dir}/definitions.json`,
      // A command takes 2 KiB at most; a consumer holds a message about three times over
      // while it receives and dead-letters it, so the broker refuses anything above 16 MiB
      // at publish (its default is 128 MiB) and no consumer ever has to hold one.
      `max_message_size = ${brokerMaxMessageBytes}`,
      "",
    ].join("\n"),
  );
  writeFileSync(`${dir}/rabbitmq-env.conf`, "");
  writeFileSync(`${dir}/enabled_plugins`, "[].\n");

  const env: Record<string, string> = {
    ...BASE_ENV,
    HOME: home,
    RABBITMQ_NODENAME: nodename,
    RABBITMQ_NODE_IP_ADDRESS: "127.0.0.1",
    RABBITMQ_NODE_PORT: String(nodePort),
    RABBITMQ_DIST_PORT: String(distPort),
    ERL_EPMD_ADDRESS: "127.0.0.1",
    ERL_EPMD_PORT: String(epmdPort),
    RABBITMQ_MNESIA_BASE: `${dir}/mnesia`,
    RABBITMQ_LOG_BASE: logBase,
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
  const processes: RecordedProcess[] = [];
  const record = (spawned: RecordedProcess) => {
    processes.push(spawned);
    onSpawn(spawned);
  };
  const stopAll = () => stopProcesses([...processes].reverse(), 15_000, dir);

  try {
    // A private epmd in the foreground, so its pid is ours to record and stop. Erlang
    // would otherwise start a daemonized epmd that outlives the node with no owner, or
    // share the system one on 4369 that runs as another user.
    const epmdLog = `${dir}/epmd.log`;
    const epmdChild = spawnDetached(epmd, ["-port", String(epmdPort), "-address", "127.0.0.1"], {
      env,
      logFile: epmdLog,
      cwd: dir,
    });
    record({
      name: "epmd",
      pid: epmdChild.pid,
      startTicks: processStartTicks(epmdChild.pid) ?? 0,
      group: true,
    });
    await waitUntil({
      what: `epmd on port ${epmdPort}`,
      child: epmdChild,
      timeoutMs: 10_000,
      intervalMs: 20,
      logs: [epmdLog],
      probe: () => tcpOpen(epmdPort),
    });

    const stdoutLog = `${dir}/stdout.log`;
    const nodeLog = `${logBase}/${nodename}.log`;
    const server = spawnDetached(RABBITMQ_SERVER, [], { env, logFile: stdoutLog, cwd: dir });
    // The script stays as a parent shell that forwards SIGTERM to the beam.smp it runs
    // in the background; both are recorded so that nothing is left behind either way.
    record({
      name: "rabbitmq",
      pid: server.pid,
      startTicks: processStartTicks(server.pid) ?? 0,
      group: true,
    });
    log(`rabbitmq: node ${nodename} starting on 127.0.0.1:${nodePort}`);

    const beamPid = await waitUntil({
      what: "rabbitmq beam.smp process",
      child: server,
      timeoutMs: 10_000,
      intervalMs: 20,
      logs: [stdoutLog],
      probe: async () => childrenNamed(server.pid, "beam.smp")[0],
    });
    record({
      name: "rabbitmq-beam",
      pid: beamPid,
      startTicks: processStartTicks(beamPid) ?? 0,
      group: false,
    });

    const url = `amqp://guest:guest@127.0.0.1:${nodePort}/${VHOST}`;
    await waitUntil({
      what: `rabbitmq node ${nodename}`,
      child: server,
      timeoutMs: readyTimeoutMs,
      intervalMs: 200,
      logs: [stdoutLog, nodeLog],
      probe: async () => {
        const connection = await connect(url);
        // amqplib emits 'error' on a socket error or a fatal close: unheard, it would end the
        // process before the failed start could stop what it started.
        connection.on("error", () => undefined);
        try {
          // The port was free when picked but released before the node bound it: the
          // answer must come from this node, whose random name starts its cluster name (the
          // host part there is the machine's name, not "localhost").
          const served = (connection as unknown as ServedConnection).connection.serverProperties
            .cluster_name;
          if (typeof served !== "string" || served.split("@")[0] !== nodename.split("@")[0]) {
            throw new Error(`port ${nodePort} is served by ${String(served)}, not ${nodename}`);
          }
          await connection.createChannel();
          return true;
        } finally {
          await connection.close();
        }
      },
    });
    return {
      url,
      nodename,
      nodePort,
      distPort,
      epmdPort,
      ctlEnv: env,
      logFiles: [stdoutLog, nodeLog],
      processes,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
