// Starts private Valkey (or Debian's Redis 7.0) servers on loopback for the local stack
// and for tests that need a datastore with a chosen durability setup.
import { mkdirSync, writeFileSync } from "node:fs";
import Redis from "ioredis";
import {
  BASE_ENV,
  findBinary,
  freePorts,
  isRunning,
  processStartTicks,
  SETUP_HINT,
  StackError,
  spawnDetached,
  stopProcesses,
  waitUntil,
} from "./process";

export interface StartValkeyOptions {
  /** Directory that holds this server's config, data, AOF and logs. */
  dir: string;
  /** Loopback port; a free one when absent. */
  port?: number;
  appendonly: boolean;
  /** `host:port` of the primary to replicate from. */
  replicaOf?: string;
  /** More config lines, each `directive value...`, appended after the defaults. */
  extraArgs?: string[];
  /** Server binary; `valkey-server` from PATH when absent. */
  binary?: string;
  readyTimeoutMs?: number;
  /** Called as soon as the process exists, so a caller can record it before readiness. */
  onSpawn?: (spawned: { pid: number; startTicks: number }) => void;
}

export interface RunningValkey {
  url: string;
  port: number;
  pid: number;
  startTicks: number;
  logFile: string;
  stop(): Promise<void>;
}

/** Config values are quoted so that a directory with spaces stays one argument. */
function quote(value: string): string {
  return JSON.stringify(value);
}

/**
 * Starts one server detached and waits until it answers (as itself: its process id). It does not wait for
 * replication: a replica of an absent primary is a valid thing for a test to want.
 */
export async function startValkey({
  dir,
  port,
  appendonly,
  replicaOf,
  extraArgs = [],
  binary = "valkey-server",
  readyTimeoutMs = 30_000,
  onSpawn = () => {},
}: StartValkeyOptions): Promise<RunningValkey> {
  const command = findBinary(binary);
  if (command === undefined) {
    throw new StackError(
      "missing-binary",
      binary === "valkey-server"
        ? `valkey-server not found: install Debian package valkey-server (>= 7.2) from bookworm-backports, or ${SETUP_HINT}`
        : `${binary} not found: install its Debian package (redis-server for /usr/bin/redis-server)`,
    );
  }
  const serverPort = port ?? (await freePorts(1))[0]!;
  mkdirSync(dir, { recursive: true });
  const logFile = `${dir}/server.log`;
  const configFile = `${dir}/server.conf`;
  const lines = [
    "bind 127.0.0.1",
    `port ${serverPort}`,
    "protected-mode no",
    "daemonize no",
    `dir ${quote(dir)}`,
    "dbfilename dump.rdb",
    `appendonly ${appendonly ? "yes" : "no"}`,
    "appendfsync always",
    "appenddirname appendonlydir",
    'save ""',
    // A 2 ms WAITAOF slice ends when the server notices it expired, within 1/hz s: at 500
    // (the maximum) a slice outlasts 2 ms by 2 ms at most, not 10 (docs/durability.md).
    "hz 500",
    // Rewrite when the AOF has grown by 3 times its size after the last rewrite, not once:
    // each rewrite's child takes a core for seconds (docs/durability.md, Server settings).
    "auto-aof-rewrite-percentage 300",
    `logfile ${quote(logFile)}`,
    // Keeps the config path (and so the stack's directory) in /proc/<pid>/cmdline, which
    // lets tests and operators see which stack a server belongs to.
    "set-proc-title no",
    // A replica attaches in milliseconds instead of waiting for the default 5 s delay.
    "repl-diskless-sync yes",
    "repl-diskless-sync-delay 0",
  ];
  if (replicaOf !== undefined) {
    const [host, primaryPort] = replicaOf.split(":");
    lines.push(`replicaof ${host} ${primaryPort}`);
  }
  lines.push(...extraArgs);
  writeFileSync(configFile, `${lines.join("\n")}\n`);
  return launch({
    command,
    what: binary,
    dir,
    port: serverPort,
    args: [configFile],
    logFile,
    readyTimeoutMs,
    onSpawn,
  });
}

/** How a server or Sentinel is started again from the config file it left in `dir`. */
interface Restart {
  dir: string;
  /** The port its config file names. */
  port: number;
  readyTimeoutMs?: number;
  onSpawn?: (spawned: { pid: number; startTicks: number }) => void;
}

/** Starts valkey-server again on `configFile` (and `extraArgs`) in `restart.dir`. */
function relaunch(
  { dir, port, readyTimeoutMs = 30_000, onSpawn = () => {} }: Restart,
  what: string,
  args: string[],
  logFile: string,
): Promise<RunningValkey> {
  const command = findBinary("valkey-server");
  if (command === undefined) {
    throw new StackError("missing-binary", `valkey-server not found: ${SETUP_HINT}`);
  }
  return launch({ command, what, dir, port, args, logFile, readyTimeoutMs, onSpawn });
}

/**
 * Starts a server again from the config file an earlier startValkey wrote in `dir`, as it
 * stands now: Sentinel rewrites it (CONFIG REWRITE) when it makes the server a primary or
 * a replica, and that is the role it must come back in. Its data and AOF are kept.
 */
export async function restartValkey(restart: Restart): Promise<RunningValkey> {
  const { dir } = restart;
  return relaunch(restart, "valkey-server", [`${dir}/server.conf`], `${dir}/server.log`);
}

/** Starts a Sentinel again from the config file it rewrote in `dir`, as startSentinel left it. */
export async function restartSentinelProcess(restart: Restart): Promise<RunningValkey> {
  const { dir } = restart;
  const args = [`${dir}/sentinel.conf`, "--sentinel"];
  return relaunch(restart, "valkey sentinel", args, `${dir}/sentinel.log`);
}

export interface StartSentinelOptions {
  /** Directory that holds this sentinel's config (which it rewrites as it learns) and log. */
  dir: string;
  port: number;
  /** The `sentinel ...` lines: monitor, down-after-milliseconds and the like. */
  sentinelLines: string[];
  readyTimeoutMs?: number;
  onSpawn?: (spawned: { pid: number; startTicks: number }) => void;
}

/**
 * Starts one Valkey Sentinel detached (`valkey-server sentinel.conf --sentinel`: Debian's
 * valkey-sentinel package is not needed) and waits until it answers as itself. Sentinel
 * refuses to start without a config file it can write, so the file lives in `dir`.
 */
export async function startSentinel({
  dir,
  port,
  sentinelLines,
  readyTimeoutMs = 30_000,
  onSpawn = () => {},
}: StartSentinelOptions): Promise<RunningValkey> {
  const command = findBinary("valkey-server");
  if (command === undefined) {
    throw new StackError("missing-binary", `valkey-server not found: ${SETUP_HINT}`);
  }
  mkdirSync(dir, { recursive: true });
  const logFile = `${dir}/sentinel.log`;
  const configFile = `${dir}/sentinel.conf`;
  const lines = [
    "bind 127.0.0.1",
    `port ${port}`,
    "protected-mode no",
    "daemonize no",
    `dir ${quote(dir)}`,
    `logfile ${quote(logFile)}`,
    // As for the servers: the config path stays visible in /proc/<pid>/cmdline.
    "set-proc-title no",
    ...sentinelLines,
  ];
  writeFileSync(configFile, `${lines.join("\n")}\n`);
  return launch({
    command,
    what: "valkey sentinel",
    dir,
    port,
    args: [configFile, "--sentinel"],
    logFile,
    readyTimeoutMs,
    onSpawn,
  });
}

/**
 * Spawns a server (or sentinel) detached and waits until it answers as itself: its process
 * id. It does not wait for replication.
 */
async function launch({
  command,
  what,
  dir,
  port,
  args,
  logFile,
  readyTimeoutMs,
  onSpawn,
}: {
  command: string;
  what: string;
  dir: string;
  port: number;
  args: string[];
  logFile: string;
  readyTimeoutMs: number;
  onSpawn: (spawned: { pid: number; startTicks: number }) => void;
}): Promise<RunningValkey> {
  const stdoutFile = `${dir}/stdout.log`;
  const child = spawnDetached(command, args, {
    env: BASE_ENV,
    logFile: stdoutFile,
    cwd: dir,
  });
  const url = `redis://127.0.0.1:${port}`;
  const startTicks = processStartTicks(child.pid) ?? 0;
  onSpawn({ pid: child.pid, startTicks });
  const stop = async () => {
    await stopProcesses([{ pid: child.pid, startTicks, group: true }], 10_000, dir);
  };
  try {
    await waitUntil({
      what: `${what} on port ${port}`,
      child,
      timeoutMs: readyTimeoutMs,
      logs: [stdoutFile, logFile],
      // The port was free when picked but released before the server bound it: another
      // server may have taken it since, so the answer must come from this child's process.
      probe: () =>
        withClient(url, async (client) => {
          const pid = /^process_id:(\d+)/m.exec(await client.info("server"))?.[1];
          if (pid === String(child.pid)) return true;
          throw new Error(`port ${port} answered from process ${pid}, not ${child.pid}`);
        }),
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, port, pid: child.pid, startTicks, logFile, stop };
}

/** Debian 12's redis-server 7.0 has no WAITAOF; tests use it to check boot refusal. */
export function startRedis70(options: Omit<StartValkeyOptions, "binary">): Promise<RunningValkey> {
  return startValkey({ ...options, binary: "/usr/bin/redis-server" });
}

/**
 * Runs `fn` with a short-lived client that never retries, so probes fail fast. With
 * `commandTimeoutMs`, a command that gets no answer (a stopped server) fails after it too.
 */
export async function withClient<T>(
  url: string,
  fn: (client: Redis) => Promise<T>,
  { commandTimeoutMs }: { commandTimeoutMs?: number } = {},
): Promise<T> {
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
    enableOfflineQueue: false,
    ...(commandTimeoutMs === undefined ? {} : { commandTimeout: commandTimeoutMs }),
  });
  // ioredis also emits connection errors as events; the awaited call reports them.
  client.on("error", () => {});
  try {
    await client.connect();
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

/**
 * Waits until the primary has every replica attached and a probe write is fsynced to the
 * AOF of all of them (WAITAOF 1 N), which is exactly the guarantee `aof-replicated`
 * durability relies on.
 */
export async function waitForReplicatedAof(
  primary: RunningValkey,
  replica: RunningValkey | RunningValkey[],
  timeoutMs: number,
): Promise<void> {
  const replicas = Array.isArray(replica) ? replica : [replica];
  const count = replicas.length;
  await waitUntil({
    what: `valkey replicas attached with WAITAOF 1 ${count}`,
    timeoutMs,
    logs: [primary.logFile, ...replicas.map((server) => server.logFile)],
    // A server stopped meanwhile (an interrupted start) ends the wait at once.
    stopped: () =>
      [primary, ...replicas]
        .filter((server) => !isRunning(server.pid, server.startTicks))
        .map((server) => `valkey on port ${server.port} stopped`)[0],
    probe: () =>
      withClient(primary.url, async (client) => {
        const info = await client.info("replication");
        const slaves = Number(/connected_slaves:(\d+)/.exec(info)?.[1] ?? 0);
        if (slaves < count) return undefined;
        await client.set("matchd:stack:probe", String(Date.now()));
        const acks = (await client.call("WAITAOF", "1", String(count), "2000")) as [number, number];
        if (!(acks[0] >= 1 && acks[1] >= count)) return undefined;
        await client.del("matchd:stack:probe");
        return true;
      }),
  });
}
