// The private local stack: a Valkey primary and replica (AOF fsync always) and a RabbitMQ
// node, all on loopback under one directory, started detached so they outlive the caller.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import {
  findBinary,
  freePorts,
  isRunning,
  processStartTicks,
  type RecordedProcess,
  SETUP_HINT,
  StackError,
  stopProcesses,
} from "./process";
import { RABBITMQ_CTL, RABBITMQ_SERVER, type RunningRabbitmq, startRabbitmq } from "./rabbitmq";
import { declareTap, tapMaxMessages, tapQueue } from "./tap";
import { startValkey, waitForReplicatedAof } from "./valkey";

export { StackError, type StackErrorCode } from "./process";
export {
  type RunningValkey,
  type StartValkeyOptions,
  startRedis70,
  startValkey,
} from "./valkey";

export interface StackInfo {
  dir: string;
  datastoreUrl: string;
  replicaUrl: string;
  /** amqp://guest:guest@127.0.0.1:PORT/matchd */
  brokerUrl: string;
  /** Never set today: the management plugin is off because it slows the node's boot. */
  managementUrl?: string;
  pids: Record<string, number>;
  /** True when stackUp found this stack already running in `dir` and started nothing. */
  reused?: boolean;
}

/**
 * What D/stack.json holds. While starting it lists only the processes spawned so far, so
 * that stackDown can still stop them if the caller dies before the stack is ready.
 */
type StackRecord =
  | { version: 1; status: "starting"; dir: string; processes: RecordedProcess[] }
  | (StackInfo & {
      version: 1;
      status: "up";
      startedAt: string;
      startupMs: number;
      ports: Record<string, number>;
      rabbitmqNode: string;
      processes: RecordedProcess[];
    });

/** Subdirectories stackUp owns; it clears them before a fresh start in a used directory. */
const OWN_SUBDIRS = ["valkey-primary", "valkey-replica", "rabbitmq"];

function readRecord(dir: string): StackRecord | undefined {
  const file = `${dir}/stack.json`;
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as StackRecord;
}

function toInfo(record: Extract<StackRecord, { status: "up" }>): StackInfo {
  const { dir, datastoreUrl, replicaUrl, brokerUrl, pids } = record;
  return { dir, datastoreUrl, replicaUrl, brokerUrl, pids };
}

/**
 * D/env, for a shell's `source` and for `docker run --env-file` alike. Docker takes only
 * NAME=value lines and refuses a name holding a space, so the shell's `set -a` (which makes
 * the assignments exported) is written as `set${IFS}-a`: the shell splits it into `set -a`,
 * while Docker reads a variable name that is not set and skips it. zsh does not split
 * there; its users write `set -a; source D/env; set +a`.
 */
function envFile(record: { datastoreUrl: string; replicaUrl: string; brokerUrl: string }): string {
  return [
    "# matchd stack: `source` this file (its variables are exported), or docker run --env-file it.",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text, expanded by the shell.
    "set${IFS}-a",
    `MATCHING_DATASTORE_URL=${record.datastoreUrl}`,
    `MATCHING_REPLICA_URL=${record.replicaUrl}`,
    `MATCHING_BROKER_URL=${record.brokerUrl}`,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text, expanded by the shell.
    "set${IFS}+a",
    "",
  ].join("\n");
}

function writeAtomically(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

function checkBinaries(): void {
  const missing: string[] = [];
  if (findBinary("valkey-server") === undefined) {
    missing.push("valkey-server (Debian package valkey-server >= 7.2, from bookworm-backports)");
  }
  if (findBinary(RABBITMQ_SERVER) === undefined || findBinary("epmd") === undefined) {
    missing.push(`${RABBITMQ_SERVER} and epmd (Debian package rabbitmq-server)`);
  }
  if (missing.length > 0) {
    throw new StackError("missing-binary", `missing: ${missing.join("; ")}. To fix: ${SETUP_HINT}`);
  }
}

/**
 * Starts the stack under `dir` and returns once every server is ready: the replica's
 * AOF confirms a probe write (WAITAOF 1 1) and an AMQP channel opens on the vhost.
 *
 * Idempotent: when `dir/stack.json` records a ready stack whose processes all still run,
 * it returns that stack's info without starting anything. When only part of it runs (or
 * a start that never finished left processes behind), it fails with `stale-stack` (run
 * stackDown first). When none runs, it clears its own subdirectories (old data and logs)
 * and starts afresh.
 */
export async function stackUp({
  dir,
  log = () => {},
  tap = false,
}: {
  dir: string;
  log?: (line: string) => void;
  /** Declare the tap queue (see ./tap): for a stack a person uses, not for benchmarks. */
  tap?: boolean;
}): Promise<StackInfo> {
  const root = resolve(dir);
  mkdirSync(root, { recursive: true });
  return withDirLock(root, "stack up", () => stackUpLocked(root, log, tap));
}

async function stackUpLocked(
  root: string,
  log: (line: string) => void,
  tap: boolean,
): Promise<StackInfo> {
  const existing = readRecord(root);
  if (existing !== undefined) {
    const running = existing.processes.filter((p) => isRunning(p.pid, p.startTicks));
    if (existing.status === "up" && running.length === existing.processes.length) {
      log(`stack in ${root} is already running; reusing it`);
      return { ...toInfo(existing), reused: true };
    }
    if (running.length > 0) {
      throw new StackError(
        "stale-stack",
        `part of the stack recorded in ${root}/stack.json still runs (${running
          .map((p) => `${p.name}=${p.pid}`)
          .join(", ")}); run stackDown on ${root} first`,
      );
    }
  }
  // A previous stack's env and wrapper name ports that may be someone else's by now: a
  // failed start (missing binaries included) must not leave them for a script to source.
  for (const file of ["env", "rabbitmqctl"]) rmSync(`${root}/${file}`, { force: true });
  checkBinaries();
  for (const sub of OWN_SUBDIRS) rmSync(`${root}/${sub}`, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });

  const started = Date.now();
  const spawned: RecordedProcess[] = [];
  const recordSpawn = (spawnedProcess: RecordedProcess) => {
    spawned.push(spawnedProcess);
    const record: StackRecord = { version: 1, status: "starting", dir: root, processes: spawned };
    writeAtomically(`${root}/stack.json`, `${JSON.stringify(record, null, 2)}\n`);
  };
  try {
    // Every port reserved at once: reserved separately, two servers starting side by side
    // could be handed the same port (seen: the replica took RabbitMQ's).
    const [primaryPort, replicaPort, nodePort, distPort, epmdPort] = (await freePorts(5)) as [
      number,
      number,
      number,
      number,
      number,
    ];
    // RabbitMQ's ~4 s boot dominates, so the datastore starts alongside it.
    const broker = startRabbitmq({
      dir: `${root}/rabbitmq`,
      log,
      onSpawn: recordSpawn,
      ports: [nodePort, distPort, epmdPort],
    });
    const datastore = (async () => {
      const primary = await startValkey({
        dir: `${root}/valkey-primary`,
        port: primaryPort,
        appendonly: true,
        onSpawn: (p) => recordSpawn({ name: "valkey-primary", ...p, group: true }),
      });
      const replica = await startValkey({
        dir: `${root}/valkey-replica`,
        port: replicaPort,
        appendonly: true,
        replicaOf: `127.0.0.1:${primary.port}`,
        onSpawn: (p) => recordSpawn({ name: "valkey-replica", ...p, group: true }),
      });
      await waitForReplicatedAof(primary, replica, 30_000);
      log(`valkey: primary ${primary.url}, replica ${replica.url} ready`);
      return { primary, replica };
    })();
    const [settledBroker, settledDatastore] = await Promise.allSettled([broker, datastore]);
    if (settledBroker.status === "rejected") throw settledBroker.reason;
    if (settledDatastore.status === "rejected") throw settledDatastore.reason;
    const { primary, replica } = settledDatastore.value;
    const node = settledBroker.value;
    log(`rabbitmq: ${node.url} ready`);

    const processes = [
      { name: "valkey-primary", pid: primary.pid, startTicks: primary.startTicks, group: true },
      { name: "valkey-replica", pid: replica.pid, startTicks: replica.startTicks, group: true },
      ...node.processes,
    ];
    const record: StackRecord = {
      version: 1,
      status: "up",
      dir: root,
      datastoreUrl: primary.url,
      replicaUrl: replica.url,
      brokerUrl: node.url,
      pids: Object.fromEntries(processes.map((p) => [p.name, p.pid])),
      startedAt: new Date(started).toISOString(),
      startupMs: Date.now() - started,
      ports: {
        "valkey-primary": primary.port,
        "valkey-replica": replica.port,
        amqp: node.nodePort,
        "erlang-dist": node.distPort,
        epmd: node.epmdPort,
      },
      rabbitmqNode: node.nodename,
      processes,
    };
    if (tap) {
      await declareTap(node.url);
      log(
        `rabbitmq: queue ${tapQueue} bound to every event exchange (${tapMaxMessages} messages at most)`,
      );
    }
    // Recorded as up only now: a start that failed (the tap included) must not read as up.
    writeAtomically(`${root}/stack.json`, `${JSON.stringify(record, null, 2)}\n`);
    writeAtomically(`${root}/env`, envFile(record));
    writeRabbitmqctlWrapper(root, node);
    log(`stack up in ${record.startupMs} ms; source ${root}/env`);
    return toInfo(record);
  } catch (error) {
    // Nothing half-started may outlive a failed start: stop what did come up.
    await stopProcesses(spawned, 10_000, root).catch(() => {});
    throw error;
  }
}

/**
 * A script that runs rabbitmqctl against this node (for a human at a shell), since the
 * node is only reachable with its private HOME, cookie and epmd port.
 */
function writeRabbitmqctlWrapper(root: string, node: RunningRabbitmq): void {
  const exports = Object.entries(node.ctlEnv)
    .map(([key, value]) => `export ${key}=${JSON.stringify(value)}`)
    .join("\n");
  writeFileSync(
    `${root}/rabbitmqctl`,
    `#!/bin/sh\n# Runs rabbitmqctl against this stack's private node.\n${exports}\nexec ${RABBITMQ_CTL} "$@"\n`,
    { mode: 0o755 },
  );
}

/**
 * Stops exactly the processes recorded in `dir/stack.json` (checked against their start
 * time, so a reused pid is never signalled): SIGTERM, then SIGKILL after a bound. It
 * removes no file; the next stackUp clears the old data.
 */
export async function stackDown({ dir }: { dir: string }): Promise<{ stopped: string[] }> {
  const root = resolve(dir);
  if (!existsSync(root)) return { stopped: [] };
  return withDirLock(root, "stack down", () => stackDownLocked(root));
}

/**
 * Runs `action` holding `root/.lock` (created exclusively, holding the holder's pid and start
 * time): without it, two commands on one directory interleave, e.g. a second `stack up`
 * clearing the data under the first one's servers, or a `stack down` stopping a start
 * half-way that then goes on spawning. A lock whose holder is gone (a crash, a kill -9) is
 * taken over; one whose holder runs is refused at once rather than waited for. Within one
 * process the lock is shared (see below).
 */
async function withDirLock<T>(root: string, what: string, action: () => Promise<T>): Promise<T> {
  const path = `${root}/.lock`;
  const mine = `${process.pid} ${processStartTicks(process.pid) ?? 0}\n`;
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, mine, { flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt >= 50) throw error;
    }
    let holder: string;
    try {
      holder = readFileSync(path, "utf8");
    } catch {
      continue; // released meanwhile: try again
    }
    const match = /^(\d+) (\d+)\n$/.exec(holder);
    if (match === null) {
      // Being written this instant (or truncated by a crash): look again shortly.
      await Bun.sleep(20);
      if (attempt >= 25) rmSync(path, { force: true });
      continue;
    }
    const pid = Number(match[1]);
    const startTicks = Number(match[2]);
    // This process's own start still holds it: the bench stops a start it cut short (a
    // Ctrl-C) while that start runs, on purpose; the holder releases it.
    if (`${pid} ${startTicks}\n` === mine) return action();
    if (isRunning(pid, startTicks || undefined)) {
      throw new StackError(
        "busy",
        `${what}: another matchd (pid ${pid}) is starting or stopping the stack in ${root}; let it finish, then try again`,
      );
    }
    rmSync(path, { force: true });
  }
  try {
    return await action();
  } finally {
    rmSync(path, { force: true });
  }
}

async function stackDownLocked(root: string): Promise<{ stopped: string[] }> {
  const record = readRecord(root);
  if (record === undefined) return { stopped: [] };
  const byName = (names: string[]) => record.processes.filter((p) => names.includes(p.name));
  let serversFailed: unknown;
  const servers = await stopProcesses(
    byName(["valkey-primary", "valkey-replica", "rabbitmq", "rabbitmq-beam"]),
    15_000,
    root,
  ).catch((error: unknown) => {
    serversFailed = error;
    return [] as number[];
  });
  // epmd last: the node deregisters from it while it shuts down. Stopped also when a server
  // would not stop, so that what can go does not outlive the failure with no record left.
  const epmd = await stopProcesses(byName(["epmd"]), 5_000, root).catch((error: unknown) => {
    // The servers' failure, if any, is the one to report; epmd's otherwise.
    serversFailed ??= error;
    return [] as number[];
  });
  const stoppedPids = [...servers, ...epmd];
  if (serversFailed !== undefined) throw serversFailed;
  return {
    stopped: record.processes.filter((p) => stoppedPids.includes(p.pid)).map((p) => p.name),
  };
}

export interface StackStatus {
  /** True when every recorded process runs. */
  running: boolean;
  info?: StackInfo;
  processes: { name: string; pid: number; running: boolean }[];
}

/** What `dir/stack.json` records and which of its processes still run. */
export async function stackStatus(dir: string): Promise<StackStatus> {
  const record = readRecord(resolve(dir));
  if (record === undefined) return { running: false, processes: [] };
  const processes = record.processes.map((p) => ({
    name: p.name,
    pid: p.pid,
    running: isRunning(p.pid, p.startTicks),
  }));
  if (record.status !== "up") return { running: false, processes };
  return { running: processes.every((p) => p.running), info: toInfo(record), processes };
}
