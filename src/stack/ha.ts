// The high-availability datastore of the private stack (`stack up --ha`): three Valkey data
// nodes, one primary and two replicas, watched by three Sentinels that fail over between
// them; and what tests and the failover benchmark do to it: ask which node is the primary,
// kill a node, restart it, and wait for a failover.
import {
  isRunning,
  type RecordedProcess,
  StackError,
  settleAll,
  signalGroup,
  waitUntil,
} from "./process";
import type { BrokerClusterStatus } from "./rabbitmq-cluster";
import {
  type HaInfo,
  haRecord,
  nodeNamed,
  type StackInfo,
  type UpRecord,
  withDirLock,
  writeRecord,
} from "./record";
import {
  type RunningValkey,
  restartValkey,
  startSentinel,
  startValkey,
  waitForReplicatedAof,
  withClient,
} from "./valkey";

export const haMasterName = "matchd";
/**
 * Short on purpose, so that a test sees a failover within seconds: a Sentinel deems the
 * primary down after 1 s without a valid answer, and a failover that stalls is given up
 * and may be retried after 2 s. Production setups use tens of seconds for both.
 */
export const haDownAfterMs = 1000;
export const haFailoverTimeoutMs = 2000;
/** Two of the three Sentinels must agree that the primary is down. */
const quorum = 2;

/** Names that imply no role: a failover makes any of them the primary. */
export const haNodeNames = ["valkey-1", "valkey-2", "valkey-3"] as const;
export const haSentinelNames = ["sentinel-1", "sentinel-2", "sentinel-3"] as const;
/** The ports startHaDatastore takes: each node's, then each Sentinel's. */
export const haPortCount = haNodeNames.length + haSentinelNames.length;

const host = "127.0.0.1";
/** A bound on every command of the helpers below: a stopped (SIGSTOP) server never answers. */
const commandTimeoutMs = 1000;

export interface HaDatastore {
  /** The datastore's part of the stack's HaInfo; the broker cluster adds its nodes. */
  ha: Omit<HaInfo, "brokerNodes">;
  datastoreUrl: string;
  replicaUrl: string;
  processes: RecordedProcess[];
  ports: Record<string, number>;
}

/**
 * Each data node and Sentinel on its port, with a loopback source address of its own
 * (127.0.0.1x for nodes, 127.0.0.2x for Sentinels), which a partition can cut.
 */
function haAddresses(root: string, ports: number[]) {
  const nodes = haNodeNames.map((name, i) => ({
    name,
    host,
    port: ports[i]!,
    dir: `${root}/${name}`,
    source: `127.0.0.${11 + i}`,
  }));
  const sentinels = haSentinelNames.map((name, i) => ({
    name,
    host,
    port: ports[3 + i]!,
    source: `127.0.0.${21 + i}`,
  }));
  return { nodes, sentinels };
}

/** A Sentinel's configuration: the master to watch and the stack's short test timings. */
function sentinelLines(source: string, primaryPort: number): string[] {
  return [
    `bind-source-addr ${source}`,
    `sentinel announce-ip ${host}`,
    `sentinel monitor ${haMasterName} ${host} ${primaryPort} ${quorum}`,
    `sentinel down-after-milliseconds ${haMasterName} ${haDownAfterMs}`,
    `sentinel failover-timeout ${haMasterName} ${haFailoverTimeoutMs}`,
    `sentinel parallel-syncs ${haMasterName} 1`,
  ];
}

/**
 * Starts valkey-1 as the primary, valkey-2 and valkey-3 as its replicas, then the three
 * Sentinels, and returns once both replicas' AOF confirm a probe write (WAITAOF 1 2) and
 * every Sentinel knows the primary, both replicas and the two other Sentinels.
 */
export async function startHaDatastore({
  root,
  ports,
  onSpawn,
  log,
}: {
  root: string;
  /** Six free ports: the three nodes', then the three Sentinels'. */
  ports: number[];
  onSpawn: (spawned: RecordedProcess) => void;
  log: (line: string) => void;
}): Promise<HaDatastore> {
  const { nodes, sentinels } = haAddresses(root, ports);
  const [first, ...others] = nodes as [HaInfo["nodes"][0], ...HaInfo["nodes"]];
  const processes: RecordedProcess[] = [];
  const record = (name: string) => (spawned: { pid: number; startTicks: number }) => {
    const entry = { name, ...spawned, group: true };
    processes.push(entry);
    onSpawn(entry);
  };
  const nodeOptions = (node: HaInfo["nodes"][0]) => ({
    dir: node.dir,
    port: node.port,
    appendonly: true,
    // Sentinel hands out the address a replica announces; pinned, so it is loopback's. Its
    // own connections leave from an address of its own, which a partition can cut.
    extraArgs: [`replica-announce-ip ${host}`, `bind-source-addr ${node.source}`],
    onSpawn: record(node.name),
  });

  const primary = await startValkey(nodeOptions(first));
  const replicas = await settleAll(
    others.map((node) => startValkey({ ...nodeOptions(node), replicaOf: `${host}:${first.port}` })),
  );
  await waitForReplicatedAof(primary, replicas, 30_000);
  log(
    `valkey: ${first.name} primary on ${primary.url}, ${others.map((n) => n.name).join(" and ")} replicas`,
  );

  const running = await settleAll(
    sentinels.map((sentinel) =>
      startSentinel({
        dir: `${root}/${sentinel.name}`,
        port: sentinel.port,
        sentinelLines: sentinelLines(sentinel.source, first.port),
        onSpawn: record(sentinel.name),
      }),
    ),
  );
  await waitForSentinelsReady(running, [primary, ...replicas], 30_000);
  log(
    `valkey: sentinels on ${sentinels.map((s) => s.port).join(", ")} watch ${haMasterName} ` +
      `(down after ${haDownAfterMs} ms, failover timeout ${haFailoverTimeoutMs} ms)`,
  );

  const ha: HaDatastore["ha"] = {
    masterName: haMasterName,
    sentinels,
    nodes,
    downAfterMs: haDownAfterMs,
    failoverTimeoutMs: haFailoverTimeoutMs,
  };
  return {
    ha,
    datastoreUrl: `redis+sentinel://${sentinels.map((s) => `${s.host}:${s.port}`).join(",")}/${haMasterName}`,
    replicaUrl: `redis://${host}:${nodes[1]!.port}`,
    processes,
    ports: Object.fromEntries([...nodes, ...sentinels].map((n) => [n.name, n.port])),
  };
}

/** SENTINEL MASTER's flat field/value reply, as a map. */
function fields(reply: unknown): Map<string, string> {
  const flat = reply as string[];
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(flat[i]!, flat[i + 1]!);
  return map;
}

/**
 * Waits until each Sentinel sees the primary up with both replicas and the two other
 * Sentinels: replicas are learnt from the primary's INFO at once, peers from the hello
 * messages they publish every 2 s, so this takes a few seconds.
 */
async function waitForSentinelsReady(
  sentinels: RunningValkey[],
  servers: RunningValkey[],
  timeoutMs: number,
): Promise<void> {
  await waitUntil({
    what: `sentinels knowing ${haMasterName} with 2 replicas and 2 other sentinels`,
    timeoutMs,
    intervalMs: 200,
    logs: sentinels.map((s) => s.logFile),
    stopped: () =>
      [...servers, ...sentinels]
        .filter((server) => !isRunning(server.pid, server.startTicks))
        .map((server) => `valkey on port ${server.port} stopped`)[0],
    probe: async () => {
      for (const sentinel of sentinels) {
        const master = await withClient(
          sentinel.url,
          async (client) => fields(await client.call("SENTINEL", "MASTER", haMasterName)),
          { commandTimeoutMs },
        );
        const ready =
          master.get("flags") === "master" &&
          master.get("num-slaves") === "2" &&
          master.get("num-other-sentinels") === "2";
        if (!ready) return undefined;
      }
      return true;
    },
  });
}

/** A node's name by its port; a port no node has (never expected) is named host:port. */
function nameAt(ha: HaInfo, port: number): string {
  return ha.nodes.find((n) => n.port === port)?.name ?? `${host}:${port}`;
}

/** The primary's port as one Sentinel names it; throws when it does not answer. */
async function askSentinel(
  sentinel: { host: string; port: number },
  masterName: string,
): Promise<number> {
  const reply = await withClient(
    `redis://${sentinel.host}:${sentinel.port}`,
    (client) => client.call("SENTINEL", "get-master-addr-by-name", masterName),
    { commandTimeoutMs },
  );
  if (!Array.isArray(reply) || reply.length < 2) {
    throw new Error(`sentinel on ${sentinel.port} knows no ${masterName}`);
  }
  return Number(reply[1]);
}

/** A node's ROLE reply, or undefined when it does not answer. */
async function roleOf(port: number): Promise<unknown[] | undefined> {
  return withClient(`redis://${host}:${port}`, (client) => client.call("ROLE"), {
    commandTimeoutMs,
  }).then(
    (reply) => reply as unknown[],
    () => undefined,
  );
}

/** The primary as the first Sentinel that answers names it. */
export async function currentPrimary(info: StackInfo): Promise<{ name: string; port: number }> {
  const { ha } = haRecord(info);
  const errors: string[] = [];
  for (const sentinel of ha.sentinels) {
    try {
      const port = await askSentinel(sentinel, ha.masterName);
      return { name: nameAt(ha, port), port };
    } catch (error) {
      errors.push(`${sentinel.name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  throw new StackError("no-sentinel", `no sentinel named the primary (${errors.join("; ")})`);
}

/** A data node's or Sentinel's recorded process (its latest start). */
export function recordedProcess(info: StackInfo, name: string): RecordedProcess {
  const record = haRecord(info);
  const known = [...record.ha.nodes, ...record.ha.sentinels].some((n) => n.name === name);
  const target = record.processes.find((p) => p.name === name);
  if (!known || target === undefined) {
    throw new StackError("not-ha", `no data node or sentinel ${name} in ${info.dir}`);
  }
  return target;
}

/** SIGKILLs a recorded process and its group (no clean shutdown) and waits until it is gone. */
async function killRecorded(info: StackInfo, name: string): Promise<void> {
  const target = recordedProcess(info, name);
  // Checked against its start time first, so that a reused pid's group is never signalled.
  if (isRunning(target.pid, target.startTicks)) signalGroup(target.pid, "SIGKILL");
  await waitUntil({
    what: `${name} (pid ${target.pid}) gone after SIGKILL`,
    timeoutMs: 5000,
    intervalMs: 10,
    logs: [],
    probe: async () => (isRunning(target.pid, target.startTicks) ? undefined : true),
  });
}

/** Kills a data node with SIGKILL, as a crash would, and waits until it is gone. */
export async function killValkeyNode(info: StackInfo, name: string): Promise<void> {
  nodeNamed(haRecord(info).ha.nodes, name, "data node");
  await killRecorded(info, name);
}

/** Kills a Sentinel with SIGKILL and waits until it is gone (it is not restarted). */
export async function killSentinel(info: StackInfo, name: string): Promise<void> {
  const { ha } = haRecord(info);
  if (!ha.sentinels.some((s) => s.name === name)) {
    throw new StackError("not-ha", `no sentinel ${name} in ${info.dir}`);
  }
  await killRecorded(info, name);
}

/**
 * Starts a killed data node again from its config file as it stands (Sentinel rewrites it
 * when it changes the node's role), on its port and with its data, and records its new pid
 * in stack.json so that stackDown stops it. A former primary comes back as a primary of its
 * own and stays one until the Sentinels make it a replica of the new primary, which they do
 * by themselves some seconds later; nothing here tells it to replicate.
 */
export async function restartValkeyNode(info: StackInfo, name: string): Promise<void> {
  await withDirLock(info.dir, `restart ${name}`, async () => {
    const record = haRecord(info);
    const node = nodeNamed(record.ha.nodes, name, "data node");
    const old = record.processes.find((p) => p.name === name);
    if (old !== undefined && isRunning(old.pid, old.startTicks)) {
      throw new StackError("node-running", `${name} still runs (pid ${old.pid}); kill it first`);
    }
    await restartValkey({
      dir: node.dir,
      port: node.port,
      // Recorded as soon as it exists: a start that fails is stopped, but one whose caller
      // dies meanwhile must still be found by stackDown.
      onSpawn: (spawned) => {
        const entry = { name, ...spawned, group: true };
        const processes = record.processes.filter((p) => p.name !== name).concat(entry);
        writeRecord({ ...record, processes, pids: { ...record.pids, [name]: spawned.pid } });
      },
    });
  });
}

/**
 * Waits until every Sentinel that answers names one primary other than `from` and that
 * node answers ROLE as a master; returns it and the time taken since `since` (by default,
 * this call).
 */
export async function waitForFailover(
  info: StackInfo,
  { from, timeoutMs, since = Date.now() }: { from: string; timeoutMs: number; since?: number },
): Promise<{ name: string; port: number; ms: number }> {
  const { ha } = haRecord(info);
  const old = nodeNamed(ha.nodes, from, "data node");
  const primary = await waitUntil({
    what: `a failover from ${from}`,
    timeoutMs,
    intervalMs: 50,
    logs: ha.sentinels.map((s) => `${info.dir}/${s.name}/sentinel.log`),
    probe: async () => {
      const answers = await Promise.allSettled(
        ha.sentinels.map((s) => askSentinel(s, ha.masterName)),
      );
      const ports = new Set(answers.flatMap((a) => (a.status === "fulfilled" ? [a.value] : [])));
      if (ports.size === 0) throw new Error("no sentinel answers");
      if (ports.size > 1) return undefined;
      const [port] = [...ports] as [number];
      if (port === old.port) return undefined;
      const role = await roleOf(port);
      return role?.[0] === "master" ? { name: nameAt(ha, port), port } : undefined;
    },
  });
  return { ...primary, ms: Date.now() - since };
}

export interface HaStatus {
  masterName: string;
  downAfterMs: number;
  failoverTimeoutMs: number;
  /** The primary most of the answering Sentinels name; absent when none answers. */
  primary?: string;
  nodes: {
    name: string;
    port: number;
    /** The recorded process runs. */
    running: boolean;
    /** Its own answer to ROLE; absent when it does not answer. */
    role?: "master" | "slave" | "sentinel";
    /** For a replica: the node it replicates from, and the state of that link. */
    replicaOf?: string;
    link?: string;
  }[];
  sentinels: { name: string; port: number; up: boolean; primary?: string }[];
  /** Each broker node up or down and the command queue's leader (see ./rabbitmq-cluster). */
  broker?: BrokerClusterStatus;
}

/** What each data node says its role is and which primary each Sentinel names. */
export async function haStatus(record: UpRecord & { ha: HaInfo }): Promise<HaStatus> {
  const { ha } = record;
  const running = (name: string) => {
    const p = record.processes.find((q) => q.name === name);
    return p !== undefined && isRunning(p.pid, p.startTicks);
  };
  const nodes = await Promise.all(
    ha.nodes.map(async (node) => {
      const role = await roleOf(node.port);
      const base = { name: node.name, port: node.port, running: running(node.name) };
      if (role === undefined) return base;
      const kind = role[0] as "master" | "slave" | "sentinel";
      if (kind !== "slave") return { ...base, role: kind };
      return {
        ...base,
        role: kind,
        replicaOf: nameAt(ha, Number(role[2])),
        link: String(role[3]),
      };
    }),
  );
  const sentinels: HaStatus["sentinels"] = await Promise.all(
    ha.sentinels.map(async (sentinel) => {
      const port = await askSentinel(sentinel, ha.masterName).catch(() => undefined);
      const base = { name: sentinel.name, port: sentinel.port };
      return port === undefined
        ? { ...base, up: false }
        : { ...base, up: true, primary: nameAt(ha, port) };
    }),
  );
  const votes = new Map<string, number>();
  for (const s of sentinels) {
    if (s.primary !== undefined) votes.set(s.primary, (votes.get(s.primary) ?? 0) + 1);
  }
  const primary = [...votes].sort((a, b) => b[1] - a[1])[0]?.[0];
  return {
    masterName: ha.masterName,
    downAfterMs: ha.downAfterMs,
    failoverTimeoutMs: ha.failoverTimeoutMs,
    ...(primary === undefined ? {} : { primary }),
    nodes,
    sentinels,
  };
}
