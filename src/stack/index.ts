// The private local stack: a Valkey primary and replica (AOF fsync always) and a RabbitMQ
// node, or with --ha three Valkey nodes under three Sentinels (./ha) and a three-node
// RabbitMQ cluster (./rabbitmq-cluster), all on loopback under one directory, started
// detached so they outlive the caller.

import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { allocatorEnv } from "../infra/allocator-env";
import { commandQueue } from "../infra/amqp/topology";
import {
  type HaStatus,
  haNodeNames,
  haPortCount,
  haSentinelNames,
  haStatus,
  startHaDatastore,
} from "./ha";
import { heal } from "./ha-faults";
import {
  findBinary,
  freePorts,
  isRunning,
  type RecordedProcess,
  SETUP_HINT,
  StackError,
  stopProcesses,
} from "./process";
import { RABBITMQ_CTL, RABBITMQ_SERVER, startRabbitmq } from "./rabbitmq";
import {
  brokerClusterPortCount,
  brokerClusterStatus,
  brokerNodeNames,
  brokerSharedDir,
  startBrokerCluster,
} from "./rabbitmq-cluster";
import {
  type BrokerNodeInfo,
  type HaInfo,
  readRecord,
  type StackInfo,
  type StackRecord,
  toInfo,
  withDirLock,
  writeAtomically,
  writeRecord,
} from "./record";
import { declareTap, tapMaxMessages, tapQueue } from "./tap";
import { startValkey, waitForReplicatedAof } from "./valkey";
import { clusterNodeNames, clusterPortCount, startClusterDatastore } from "./valkey-cluster";

export {
  currentPrimary,
  type HaStatus,
  haDownAfterMs,
  haFailoverTimeoutMs,
  haMasterName,
  killSentinel,
  killValkeyNode,
  restartValkeyNode,
  waitForFailover,
} from "./ha";
export {
  cutLink,
  cutOff,
  freezeNode,
  handOver,
  heal,
  type PartitionPeers,
  restartSentinel,
  thawNode,
} from "./ha-faults";
export { StackError, type StackErrorCode } from "./process";
export {
  type BrokerClusterStatus,
  brokerNodesRunning,
  killBrokerNode,
  queueLeader,
  restartBrokerNode,
} from "./rabbitmq-cluster";
export type { BrokerNodeInfo, HaInfo, StackInfo } from "./record";
export {
  type RunningValkey,
  type StartValkeyOptions,
  startRedis70,
  startValkey,
} from "./valkey";

/** Subdirectories stackUp owns; it clears them before a fresh start in a used directory. */
const OWN_SUBDIRS = [
  "valkey-primary",
  "valkey-replica",
  ...haNodeNames,
  ...haSentinelNames,
  ...clusterNodeNames,
  "rabbitmq",
  ...brokerNodeNames,
  brokerSharedDir,
];

/** Files stackUp writes next to the subdirectories; a new start removes the old ones first. */
const OWN_FILES = ["env", "rabbitmqctl", "rabbitmqctl-2", "rabbitmqctl-3"];

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
    ...Object.entries(allocatorEnv).map(([name, value]) => `${name}=${value}`),
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text, expanded by the shell.
    "set${IFS}+a",
    "",
  ].join("\n");
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
 * AOF confirms a probe write (WAITAOF 1 1) and an AMQP channel opens on the vhost. With
 * `ha`, both replicas' AOF confirm it (WAITAOF 1 2) and every Sentinel knows the primary,
 * both replicas and the two other Sentinels; `datastoreUrl` is then the Sentinels'
 * `redis+sentinel://` URL and `replicaUrl` names valkey-2.
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
  ha = false,
  cluster = false,
}: {
  dir: string;
  log?: (line: string) => void;
  /** Declare the tap queue (see ./tap): for a stack a person uses, not for benchmarks. */
  tap?: boolean;
  /** Three data nodes under three Sentinels instead of a primary and a replica (see ./ha). */
  ha?: boolean;
  /** A Valkey Cluster of three primaries with a replica each (see ./valkey-cluster). */
  cluster?: boolean;
}): Promise<StackInfo> {
  const root = resolve(dir);
  mkdirSync(root, { recursive: true });
  if (ha && cluster) throw new StackError("stale-stack", "--ha and --cluster do not go together");
  return withDirLock(root, "stack up", () => stackUpLocked(root, log, tap, ha, cluster));
}

/** The broker, one node or (with --ha) a cluster, as stackUpLocked records it. */
interface Broker {
  /** One AMQP URL, or the cluster's, comma-separated. */
  brokerUrl: string;
  /** rabbitmq-1's URL in a cluster: the tap is declared there (it is a quorum queue). */
  firstUrl: string;
  /** The (first) node's Erlang name. */
  nodename: string;
  processes: RecordedProcess[];
  ports: Record<string, number>;
  /** D/rabbitmqctl, and with --ha D/rabbitmqctl-2 and -3, with the env that reaches each node. */
  wrappers: { file: string; env: Record<string, string> }[];
  brokerNodes?: BrokerNodeInfo[];
}

interface Datastore {
  datastoreUrl: string;
  replicaUrl: string;
  processes: RecordedProcess[];
  ports: Record<string, number>;
  ha?: Omit<HaInfo, "brokerNodes">;
}

/**
 * The stack recorded in `root`, when all of it runs and it is of the kind asked for: reused.
 * Throws when part of it runs, or a stack of another kind does.
 */
function runningStack(root: string, log: (line: string) => void, ha: boolean, cluster: boolean) {
  const existing = readRecord(root);
  if (existing === undefined) return undefined;
  const running = existing.processes.filter((p) => isRunning(p.pid, p.startTicks));
  if (existing.status === "up" && running.length === existing.processes.length) {
    if (existing.datastoreUrl.startsWith("redis+cluster:") !== cluster) {
      throw new StackError(
        "stale-stack",
        `a stack ${cluster ? "without" : "with"} --cluster runs in ${root}; run stackDown on ${root} first`,
      );
    }
    if ((existing.ha !== undefined) !== ha) {
      throw new StackError(
        "stale-stack",
        `a stack ${ha ? "without" : "with"} --ha runs in ${root}; run stackDown on ${root} first`,
      );
    }
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
  return undefined;
}

/**
 * Starts the broker and the datastore side by side (RabbitMQ's ~4 s boot dominates), on
 * ports reserved at once: reserved separately, two servers starting side by side could be
 * handed the same port (seen: the replica took RabbitMQ's).
 */
async function startServers(
  root: string,
  ha: boolean,
  cluster: boolean,
  recordSpawn: (spawned: RecordedProcess) => void,
  log: (line: string) => void,
): Promise<{ store: Datastore; node: Broker }> {
  const brokerPortCount = ha ? brokerClusterPortCount : singleBrokerPortCount;
  const datastorePortCount = ha ? haPortCount : cluster ? clusterPortCount : pairPortCount;
  const ports = await freePorts(brokerPortCount + datastorePortCount);
  const brokerPorts = ports.splice(0, brokerPortCount);
  const broker = ha
    ? startClusterBroker(root, brokerPorts, recordSpawn, log)
    : startSingleBroker(root, brokerPorts as [number, number, number], recordSpawn, log);
  const datastore: Promise<Datastore> = ha
    ? startHaDatastore({ root, ports, onSpawn: recordSpawn, log })
    : cluster
      ? startClusterDatastore(root, ports, recordSpawn, log)
      : startPair(root, ports as [number, number], recordSpawn, log);
  const [settledBroker, settledDatastore] = await Promise.allSettled([broker, datastore]);
  if (settledBroker.status === "rejected") throw settledBroker.reason;
  if (settledDatastore.status === "rejected") throw settledDatastore.reason;
  return { store: settledDatastore.value, node: settledBroker.value };
}

async function stackUpLocked(
  root: string,
  log: (line: string) => void,
  tap: boolean,
  ha: boolean,
  cluster: boolean,
): Promise<StackInfo> {
  const reused = runningStack(root, log, ha, cluster);
  if (reused !== undefined) return reused;
  // A previous stack's env and wrapper name ports that may be someone else's by now: a
  // failed start (missing binaries included) must not leave them for a script to source.
  for (const file of OWN_FILES) rmSync(`${root}/${file}`, { force: true });
  checkBinaries();
  for (const sub of OWN_SUBDIRS) rmSync(`${root}/${sub}`, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });

  const started = Date.now();
  const spawned: RecordedProcess[] = [];
  const recordSpawn = (spawnedProcess: RecordedProcess) => {
    spawned.push(spawnedProcess);
    writeRecord({ version: 1, status: "starting", dir: root, processes: spawned });
  };
  try {
    const { store, node } = await startServers(root, ha, cluster, recordSpawn, log);
    log(`rabbitmq: ${node.brokerUrl} ready`);
    const processes = [...store.processes, ...node.processes];
    const record: StackRecord = {
      version: 1,
      status: "up",
      dir: root,
      datastoreUrl: store.datastoreUrl,
      replicaUrl: store.replicaUrl,
      brokerUrl: node.brokerUrl,
      pids: Object.fromEntries(processes.map((p) => [p.name, p.pid])),
      ...(store.ha === undefined || node.brokerNodes === undefined
        ? {}
        : { ha: { ...store.ha, brokerNodes: node.brokerNodes } }),
      startedAt: new Date(started).toISOString(),
      startupMs: Date.now() - started,
      ports: { ...store.ports, ...node.ports },
      rabbitmqNode: node.nodename,
      processes,
    };
    if (tap) {
      await declareTap(node.firstUrl);
      log(
        `rabbitmq: queue ${tapQueue} bound to every event exchange (${tapMaxMessages} messages at most)`,
      );
    }
    // Recorded as up only now: a start that failed (the tap included) must not read as up.
    writeRecord(record);
    writeAtomically(`${root}/env`, envFile(record));
    for (const wrapper of node.wrappers)
      writeRabbitmqctlWrapper(`${root}/${wrapper.file}`, wrapper.env);
    log(`stack up in ${record.startupMs} ms; source ${root}/env`);
    return toInfo(record);
  } catch (error) {
    // Nothing half-started may outlive a failed start: stop what did come up.
    await stopProcesses(spawned, 10_000, root).catch(() => {});
    throw error;
  }
}

/** startSingleBroker's ports: AMQP, distribution, epmd. */
const singleBrokerPortCount = 3;

/** The plain broker: one node, its AMQP, distribution and epmd ports recorded as before. */
async function startSingleBroker(
  root: string,
  ports: [number, number, number],
  recordSpawn: (spawned: RecordedProcess) => void,
  log: (line: string) => void,
): Promise<Broker> {
  const node = await startRabbitmq({ dir: `${root}/rabbitmq`, log, onSpawn: recordSpawn, ports });
  return {
    brokerUrl: node.url,
    firstUrl: node.url,
    nodename: node.nodename,
    processes: node.processes,
    ports: { amqp: node.nodePort, "erlang-dist": node.distPort, epmd: node.epmdPort },
    wrappers: [{ file: "rabbitmqctl", env: node.ctlEnv }],
  };
}

/** The --ha broker: three nodes in one cluster (see ./rabbitmq-cluster). */
async function startClusterBroker(
  root: string,
  ports: number[],
  recordSpawn: (spawned: RecordedProcess) => void,
  log: (line: string) => void,
): Promise<Broker> {
  const cluster = await startBrokerCluster({ root, ports, onSpawn: recordSpawn, log });
  return {
    brokerUrl: cluster.brokerUrl,
    firstUrl: cluster.nodes[0]!.url,
    nodename: cluster.nodes[0]!.nodename,
    processes: cluster.processes,
    ports: cluster.ports,
    wrappers: cluster.ctlEnvs.map((env, i) => ({
      file: i === 0 ? "rabbitmqctl" : `rabbitmqctl-${i + 1}`,
      env,
    })),
    brokerNodes: cluster.nodes,
  };
}

/** startPair's ports: the primary's and the replica's. */
const pairPortCount = 2;

/** The plain datastore: valkey-primary and its one replica, ready once WAITAOF 1 1 holds. */
async function startPair(
  root: string,
  [primaryPort, replicaPort]: [number, number],
  recordSpawn: (spawned: RecordedProcess) => void,
  log: (line: string) => void,
): Promise<Datastore> {
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
  return {
    datastoreUrl: primary.url,
    replicaUrl: replica.url,
    processes: [
      { name: "valkey-primary", pid: primary.pid, startTicks: primary.startTicks, group: true },
      { name: "valkey-replica", pid: replica.pid, startTicks: replica.startTicks, group: true },
    ],
    ports: { "valkey-primary": primary.port, "valkey-replica": replica.port },
  };
}

/**
 * A script that runs rabbitmqctl against one node (for a human at a shell), since the
 * node is only reachable with its private HOME, cookie and epmd port.
 */
function writeRabbitmqctlWrapper(file: string, env: Record<string, string>): void {
  const exports = Object.entries(env)
    .map(([key, value]) => `export ${key}=${JSON.stringify(value)}`)
    .join("\n");
  writeFileSync(
    file,
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

async function stackDownLocked(root: string): Promise<{ stopped: string[] }> {
  // A partition left in place by an interrupted fault would outlive the stack's servers.
  heal(root);
  const record = readRecord(root);
  if (record === undefined) return { stopped: [] };
  let serversFailed: unknown;
  // Every server, Sentinels and restarted --ha nodes included, at once; epmd after them.
  const servers = await stopProcesses(
    record.processes.filter((p) => p.name !== "epmd"),
    15_000,
    root,
  ).catch((error: unknown) => {
    serversFailed = error;
    return [] as number[];
  });
  // epmd last: the node deregisters from it while it shuts down. Stopped also when a server
  // would not stop, so that what can go does not outlive the failure with no record left.
  const epmd = await stopProcesses(
    record.processes.filter((p) => p.name === "epmd"),
    5_000,
    root,
  ).catch((error: unknown) => {
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
  /**
   * For an --ha stack: each data node's role now and the primary the Sentinels name; each
   * broker node up or down and which holds the leader of partition 0's command queue.
   */
  ha?: HaStatus;
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
  const running = processes.every((p) => p.running);
  const info = toInfo(record);
  if (record.ha === undefined) return { running, info, processes };
  const haRecord = { ...record, ha: record.ha };
  const [datastore, broker] = await Promise.all([
    haStatus(haRecord),
    // A record written before the broker became a cluster has no broker nodes.
    record.ha.brokerNodes === undefined
      ? undefined
      : brokerClusterStatus(haRecord, commandQueue(0)),
  ]);
  return {
    running,
    info,
    processes,
    ha: broker === undefined ? datastore : { ...datastore, broker },
  };
}
