// The broker of `stack up --ha`: three RabbitMQ nodes on loopback that form one cluster at
// boot, sharing one cookie and the stack's own epmd; and what tests do to it: kill a node,
// restart it, and ask which node holds a quorum queue's leader.
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import {
  isRunning,
  type RecordedProcess,
  StackError,
  settleAll,
  signalGroup,
  stopProcesses,
  waitUntil,
} from "./process";
import {
  baseConfLines,
  definitions,
  nodeEnv,
  RABBITMQ_CTL,
  type SpawnedNode,
  spawnNode,
  startEpmd,
  tcpOpen,
  VHOST,
  waitForAmqp,
  writeCookie,
  writeNodeFiles,
} from "./rabbitmq";
import {
  type BrokerNodeInfo,
  type HaInfo,
  haRecord,
  nodeNamed,
  type StackInfo,
  type UpRecord,
  withDirLock,
  writeRecord,
} from "./record";

export const brokerNodeNames = ["rabbitmq-1", "rabbitmq-2", "rabbitmq-3"] as const;
/** The ports startClusterBroker takes: each node's AMQP port, each node's distribution port, epmd's. */
export const brokerClusterPortCount = 2 * brokerNodeNames.length + 1;
/** Under the stack's directory: what the nodes share (the cookie's home, definitions, epmd's log). */
export const brokerSharedDir = "rabbitmq-cluster";

const RABBITMQ_QUEUES = "/usr/lib/rabbitmq/bin/rabbitmq-queues";
/** A bound on each CLI call: one starts an Erlang VM (~0.5 s of CPU) and asks one node. */
const cliTimeoutMs = 20_000;
/** See confLines: how often the first node looks again for peers before forming alone. */
const discoveryRetryLimit = 2;

export interface RunningBrokerCluster {
  /** The three nodes' AMQP URLs, comma-separated, rabbitmq-1's first. */
  brokerUrl: string;
  nodes: BrokerNodeInfo[];
  epmdPort: number;
  /** Per node, the env under which rabbitmqctl reaches it (for the D/rabbitmqctl wrappers). */
  ctlEnvs: Record<string, string>[];
  processes: RecordedProcess[];
  ports: Record<string, number>;
}

/**
 * The env a node runs under and the CLI reaches it with. The CLI's own distribution port is
 * left to the kernel (0): by default every rabbitmqctl on the machine takes one of 35672-35682,
 * a range the stack's randomly picked ports may fall into and that parallel calls share.
 */
function clusterNodeEnv(root: string, node: BrokerNodeInfo, epmdPort: number) {
  return {
    ...nodeEnv({
      dir: node.dir,
      home: `${root}/${brokerSharedDir}/home`,
      nodename: node.nodename,
      nodePort: node.port,
      distPort: node.distPort,
      epmdPort,
    }),
    RABBITMQ_CTL_DIST_PORT_MIN: "0",
    RABBITMQ_CTL_DIST_PORT_MAX: "0",
  };
}

/**
 * Each node's rabbitmq.conf: the same peer list on all three, so they form the cluster at
 * boot by classic_config peer discovery, started side by side. `rabbitmqctl join_cluster`
 * would cost a stop_app, join_cluster and start_app (three CLI VMs and a second application
 * start) on each joining node; starting rabbitmq-1 first and the others once it had booted
 * took 10-12 s against 7-8 s for this.
 *
 * Peer discovery runs under a global lock taken on the listed nodes, and a new cluster's
 * first node enables its feature flags (migrating tables) inside that lock: so the first
 * node to take it forms the cluster, and the others join one at a time once it has. That
 * first node finds no peer with tables yet; it tries `discoveryRetryLimit` more times, 250 ms
 * apart, before it forms the cluster alone (RabbitMQ's default, 10 x 500 ms, cost 5 s).
 *
 * Nothing may be created while a node is half-way through its boot, so every node loads an
 * empty definitions file (which also keeps it from seeding the default vhost and guest) and
 * startBrokerCluster imports the real ones once all three have booted. Seen on 3.10.8 with
 * the definitions loaded at boot: a node that joined while the first one's tables were still
 * empty seeded guest itself and ended its boot on `user_already_exists`; and a vhost created
 * while a joined node was still booting stayed down on that node ("vhost 'matchd' is down"),
 * the import itself stalling for ~47 s. (With only rabbitmq-1 unlisted, so forming at once
 * outside the lock, a node also joined it half-way through its feature-flag migrations and
 * both failed: schema_integrity_check_failed, incompatible_feature_flags.)
 *
 * A restarted node has data and skips discovery: it rejoins its cluster.
 */
function confLines(root: string, node: BrokerNodeInfo, nodes: BrokerNodeInfo[]): string[] {
  return [
    ...baseConfLines(node.port),
    `load_definitions = ${root}/${brokerSharedDir}/empty-definitions.json`,
    "cluster_formation.peer_discovery_backend = classic_config",
    ...nodes.map((peer, i) => `cluster_formation.classic_config.nodes.${i + 1} = ${peer.nodename}`),
    `cluster_formation.discovery_retry_limit = ${discoveryRetryLimit}`,
    "cluster_formation.discovery_retry_interval = 250",
  ];
}

/**
 * The cluster's files: one private cookie for the three nodes and the CLI (no other node on
 * the machine has it), the definitions, and each node's directory and configuration.
 */
function prepareCluster(root: string, ports: number[]) {
  const shared = `${root}/${brokerSharedDir}`;
  mkdirSync(`${shared}/home`, { recursive: true });
  writeCookie(`${shared}/home`);
  writeFileSync(`${shared}/definitions.json`, definitions());
  writeFileSync(`${shared}/empty-definitions.json`, "{}\n");
  const id = randomBytes(4).toString("hex");
  const epmdPort = ports[6]!;
  const nodes: BrokerNodeInfo[] = brokerNodeNames.map((name, i) => ({
    name,
    nodename: `matchd-${id}-${i + 1}@localhost`,
    url: `amqp://guest:guest@127.0.0.1:${ports[i]!}/${VHOST}`,
    port: ports[i]!,
    distPort: ports[3 + i]!,
    dir: `${root}/${name}`,
  }));
  for (const node of nodes) writeNodeFiles(node.dir, confLines(root, node, nodes));
  const envs = nodes.map((node) => clusterNodeEnv(root, node, epmdPort));
  return { shared, nodes, envs, epmdPort };
}

/** A node opens its AMQP port as the last step of its boot, after it joined the cluster. */
async function waitForAmqpPorts(
  nodes: BrokerNodeInfo[],
  spawned: SpawnedNode[],
  timeoutMs: number,
  stopped: () => string | undefined,
): Promise<void> {
  await settleAll(
    nodes.map((node, i) =>
      waitUntil({
        what: `${node.name} AMQP port ${node.port}`,
        child: spawned[i]!.server,
        timeoutMs,
        intervalMs: 100,
        logs: [spawned[i]!.stdoutLog, spawned[i]!.nodeLog],
        stopped,
        probe: () => tcpOpen(node.port),
      }),
    ),
  );
}

/**
 * Starts epmd and the three nodes side by side, waits until rabbitmq-1 reports all three
 * running in its cluster, imports the definitions (the vhost and guest) once, through
 * rabbitmq-1, and returns once an AMQP channel opens on the vhost on each node.
 */
export async function startBrokerCluster({
  root,
  ports,
  onSpawn,
  log,
  readyTimeoutMs = 60_000,
}: {
  root: string;
  /** Seven free ports: the three nodes' AMQP ports, their distribution ports, then epmd's. */
  ports: number[];
  onSpawn: (spawned: RecordedProcess) => void;
  log: (line: string) => void;
  readyTimeoutMs?: number;
}): Promise<RunningBrokerCluster> {
  const { shared, nodes, envs, epmdPort } = prepareCluster(root, ports);
  const processes: RecordedProcess[] = [];
  const record = (spawned: RecordedProcess) => {
    processes.push(spawned);
    onSpawn(spawned);
  };

  try {
    await startEpmd({ dir: shared, port: epmdPort, env: envs[0]!, record });
    const [first] = nodes as [BrokerNodeInfo, ...BrokerNodeInfo[]];
    log(
      `rabbitmq: nodes ${nodes.map((n) => n.nodename).join(", ")} starting on 127.0.0.1:` +
        nodes.map((n) => n.port).join(", "),
    );
    const spawned = await settleAll(
      nodes.map((node, i) => spawnNode({ dir: node.dir, env: envs[i]!, name: node.name, record })),
    );
    // A node that exits makes waiting for the others pointless.
    const stopped = () => exitedNode(nodes, spawned);
    await waitForAmqpPorts(nodes, spawned, readyTimeoutMs, stopped);
    // Asked of rabbitmq-1 alone: each CLI call starts an Erlang VM, and on this busy 2-core
    // machine one took 0.8-1.3 s, three side by side 1.8-2.6 s. A node that formed a cluster
    // of its own shows here as missing, and the AMQP channels below could not open on it: the
    // vhost is created through rabbitmq-1 only.
    await waitForClusterRunning({
      root,
      nodes,
      epmdPort,
      ask: first,
      timeoutMs: 30_000,
      stopped,
    });
    // Once, while all three run, so that each starts the vhost.
    await runCli(RABBITMQ_CTL, envs[0]!, [
      "-n",
      first.nodename,
      "import_definitions",
      `${shared}/definitions.json`,
    ]);
    await settleAll(
      nodes.map((node, i) =>
        waitForAmqp({ ...node, node: spawned[i]!, timeoutMs: readyTimeoutMs, stopped }),
      ),
    );
    log(`rabbitmq: cluster of ${nodes.map((n) => n.name).join(", ")} running`);
    return { ...clusterPorts(nodes, epmdPort), ctlEnvs: envs, processes };
  } catch (error) {
    await stopProcesses([...processes].reverse(), 15_000, root).catch(() => {});
    throw error;
  }
}

/** The cluster's URL list and every port it took, by node. */
function clusterPorts(nodes: BrokerNodeInfo[], epmdPort: number) {
  return {
    brokerUrl: nodes.map((n) => n.url).join(","),
    nodes,
    epmdPort,
    ports: {
      ...Object.fromEntries(nodes.map((n) => [n.name, n.port] as const)),
      ...Object.fromEntries(nodes.map((n) => [`${n.name}-dist`, n.distPort] as const)),
      epmd: epmdPort,
    },
  };
}

function exitedNode(nodes: BrokerNodeInfo[], spawned: SpawnedNode[]): string | undefined {
  const i = spawned.findIndex((s) => s.server.exited() !== undefined);
  return i < 0 ? undefined : `${nodes[i]!.name} exited`;
}

/**
 * Runs a RabbitMQ CLI tool against one node and returns its stdout; throws with its output
 * when it exits non-zero or takes longer than `cliTimeoutMs`.
 */
async function runCli(tool: string, env: Record<string, string>, args: string[]): Promise<string> {
  const child = Bun.spawn([tool, ...args], {
    env,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), cliTimeoutMs);
  try {
    const [code, stdout, stderr] = await Promise.all([
      child.exited,
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
    ]);
    if (code !== 0) {
      const output = `${stdout}\n${stderr}`.trim().replaceAll(/\s+/g, " ");
      throw new StackError(
        "broker-cli",
        `${tool.split("/").pop()} ${args.join(" ")} exited ${code}: ${output}`,
      );
    }
    return stdout;
  } finally {
    clearTimeout(timer);
  }
}

/** The nodes `node` reports running in its cluster (Erlang node names). */
async function runningNodesSeenBy(
  root: string,
  node: BrokerNodeInfo,
  epmdPort: number,
): Promise<string[]> {
  const out = await runCli(RABBITMQ_CTL, clusterNodeEnv(root, node, epmdPort), [
    "-n",
    node.nodename,
    "cluster_status",
    "--formatter",
    "json",
  ]);
  const status = JSON.parse(out) as { running_nodes?: string[] };
  return status.running_nodes ?? [];
}

/** Waits until node `ask` reports all of `nodes` running in its cluster. */
async function waitForClusterRunning({
  root,
  nodes,
  epmdPort,
  ask,
  timeoutMs,
  stopped,
}: {
  root: string;
  nodes: BrokerNodeInfo[];
  epmdPort: number;
  ask: BrokerNodeInfo;
  timeoutMs: number;
  stopped?: () => string | undefined;
}): Promise<void> {
  const expected = nodes.map((n) => n.nodename).sort();
  await waitUntil({
    what: `${ask.name} reporting ${nodes.length} running broker nodes`,
    timeoutMs,
    intervalMs: 500,
    logs: [`${ask.dir}/log/${ask.nodename}.log`],
    ...(stopped === undefined ? {} : { stopped }),
    probe: async () => {
      const view = await runningNodesSeenBy(root, ask, epmdPort);
      if (view.slice().sort().join(",") !== expected.join(",")) {
        throw new Error(`${ask.name} reports running: ${view.join(", ") || "none"}`);
      }
      return true;
    },
  });
}

/** The recorded processes of a broker node: its rabbitmq-server script and its beam.smp. */
function nodeProcesses(record: UpRecord, name: string): RecordedProcess[] {
  return record.processes.filter((p) => p.name === name || p.name === `${name}-beam`);
}

/** Whether a node's recorded beam.smp runs (checked against its start time). */
function beamRuns(record: UpRecord, name: string): boolean {
  const beam = record.processes.find((p) => p.name === `${name}-beam`);
  return beam !== undefined && isRunning(beam.pid, beam.startTicks);
}

function epmdPortOf(record: UpRecord): number {
  const port = record.ports.epmd;
  if (port === undefined)
    throw new StackError("not-ha", `no epmd port in ${record.dir}/stack.json`);
  return port;
}

/**
 * Asks the live nodes in turn (rabbitmq-1 first) until one answers; throws the errors of all
 * when none does.
 */
async function askLiveNode<T>(
  record: UpRecord & { ha: HaInfo },
  what: string,
  ask: (node: BrokerNodeInfo) => Promise<T>,
): Promise<T> {
  const errors: string[] = [];
  for (const node of record.ha.brokerNodes) {
    if (!beamRuns(record, node.name)) continue;
    try {
      return await ask(node);
    } catch (error) {
      errors.push(`${node.name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  throw new StackError(
    "broker-cli",
    `no live broker node answered ${what}${errors.length > 0 ? ` (${errors.join("; ")})` : ""}`,
  );
}

/** Broker node names (rabbitmq-N) the first live node that answers reports running. */
async function runningNames(record: UpRecord & { ha: HaInfo }): Promise<string[]> {
  const port = epmdPortOf(record);
  const running = await askLiveNode(record, "cluster_status", (node) =>
    runningNodesSeenBy(record.dir, node, port),
  );
  return record.ha.brokerNodes.filter((n) => running.includes(n.nodename)).map((n) => n.name);
}

/**
 * The broker nodes (rabbitmq-N, in order) that the cluster reports running, as the first
 * live node that answers sees it; none when no node answers.
 */
export async function brokerNodesRunning(info: StackInfo): Promise<string[]> {
  return runningNames(haRecord(info)).catch((error: unknown) => {
    if (error instanceof StackError && error.code === "broker-cli") return [];
    throw error;
  });
}

/**
 * Kills a broker node with SIGKILL, as a crash would: its rabbitmq-server script's process
 * group (beam.smp and the helpers beam.smp forks, erl_child_setup and inet_gethost, are in
 * it) and its beam.smp by pid; waits until both are gone.
 */
export async function killBrokerNode(info: StackInfo, name: string): Promise<void> {
  const record = haRecord(info);
  nodeNamed(record.ha.brokerNodes, name, "broker node");
  const targets = nodeProcesses(record, name);
  // Each checked against its start time first, so that a reused pid is never signalled.
  for (const target of targets) {
    if (!isRunning(target.pid, target.startTicks)) continue;
    if (target.group) signalGroup(target.pid, "SIGKILL");
    else process.kill(target.pid, "SIGKILL");
  }
  await waitUntil({
    what: `${name} (pids ${targets.map((t) => t.pid).join(", ")}) gone after SIGKILL`,
    timeoutMs: 5000,
    intervalMs: 10,
    logs: [],
    probe: async () => (targets.some((t) => isRunning(t.pid, t.startTicks)) ? undefined : true),
  });
}

/**
 * Starts a killed broker node again with its name, ports, data and the shared cookie; having
 * data, it skips peer discovery and rejoins its cluster by itself. Its new pids go into
 * stack.json as soon as they exist, so that stackDown stops it. Resolves once an AMQP
 * channel opens on it and it reports itself and every other live node running in its
 * cluster.
 */
export async function restartBrokerNode(info: StackInfo, name: string): Promise<void> {
  await withDirLock(info.dir, `restart ${name}`, async () => {
    let record = haRecord(info);
    const node = nodeNamed(record.ha.brokerNodes, name, "broker node");
    const old = nodeProcesses(record, name).find((p) => isRunning(p.pid, p.startTicks));
    if (old !== undefined) {
      throw new StackError("node-running", `${name} still runs (pid ${old.pid}); kill it first`);
    }
    const epmd = record.processes.find((p) => p.name === "epmd");
    if (epmd === undefined || !isRunning(epmd.pid, epmd.startTicks)) {
      // Without it the node would start a daemonized epmd of its own that no record names.
      throw new StackError(
        "start-failed",
        `the stack's epmd is gone; run stack down on ${info.dir}`,
      );
    }
    const epmdPort = epmdPortOf(record);
    const spawned: RecordedProcess[] = [];
    const recordSpawn = (entry: RecordedProcess) => {
      spawned.push(entry);
      // The script comes first: the old script and beam entries both go then.
      const replaced = entry.name === name ? [name, `${name}-beam`] : [entry.name];
      const pids = Object.fromEntries(
        Object.entries(record.pids).filter(([key]) => !replaced.includes(key)),
      );
      record = {
        ...record,
        processes: record.processes.filter((p) => !replaced.includes(p.name)).concat(entry),
        pids: { ...pids, [entry.name]: entry.pid },
      };
      writeRecord(record);
    };
    try {
      const child = await spawnNode({
        dir: node.dir,
        env: clusterNodeEnv(info.dir, node, epmdPort),
        name,
        record: recordSpawn,
      });
      const stopped = () => (child.server.exited() === undefined ? undefined : `${name} exited`);
      await waitForAmqp({
        url: node.url,
        nodename: node.nodename,
        node: child,
        // A node restarted under load reads its quorum queues' logs before it listens: after
        // 450 s at 1,000 commands/s (900 MB of logs a node) that took over 60 s here.
        timeoutMs: 180_000,
        stopped,
      });
      // Its own view, which lists the others running once it has rejoined them: every node
      // whose beam.smp runs, itself included (another may have been killed and left down).
      const live = record.ha.brokerNodes.filter((n) => beamRuns(record, n.name));
      await waitForClusterRunning({
        root: info.dir,
        nodes: live,
        epmdPort,
        ask: node,
        timeoutMs: 30_000,
        stopped,
      });
    } catch (error) {
      // A failed restart leaves nothing running; its entries stay, for stackDown to skip.
      await stopProcesses([...spawned].reverse(), 15_000, info.dir).catch(() => {});
      throw error;
    }
  });
}

/** One member of `rabbitmq-queues quorum_status --formatter json`. */
interface QuorumMember {
  "Node Name"?: string;
  "Raft State"?: string;
}

/**
 * A quorum queue's leader as the first live node that answers sees it: found false when
 * the queue does not exist; leader absent while no member is leader (an election).
 */
async function quorumLeader(
  record: UpRecord & { ha: HaInfo },
  queue: string,
  vhost: string,
): Promise<{ found: false } | { found: true; leader?: string }> {
  const epmdPort = epmdPortOf(record);
  return askLiveNode(record, `quorum_status ${queue}`, async (node) => {
    let out: string;
    try {
      out = await runCli(RABBITMQ_QUEUES, clusterNodeEnv(record.dir, node, epmdPort), [
        "-n",
        node.nodename,
        "quorum_status",
        queue,
        "--vhost",
        vhost,
        "--formatter",
        "json",
      ]);
    } catch (error) {
      // 3.10 says "Error: not_found" (exit 69) for a queue that does not exist.
      if (error instanceof StackError && /\bnot_found\b/.test(error.message)) {
        return { found: false as const };
      }
      throw error;
    }
    const members = JSON.parse(out) as QuorumMember[];
    const leader = members.find((m) => m["Raft State"] === "leader")?.["Node Name"];
    const name = record.ha.brokerNodes.find((n) => n.nodename === leader)?.name;
    return name === undefined ? { found: true as const } : { found: true as const, leader: name };
  });
}

/**
 * The broker node (rabbitmq-N) holding the leader of quorum queue `queue`, from
 * `rabbitmq-queues quorum_status` (the members' own Raft states, not the queue record,
 * which follows a new leader only after a moment); undefined when the queue does not exist
 * or no member is leader just now.
 */
export async function queueLeader(
  info: StackInfo,
  queue: string,
  vhost = VHOST,
): Promise<string | undefined> {
  const result = await quorumLeader(haRecord(info), queue, vhost);
  return result.found ? result.leader : undefined;
}

export interface BrokerClusterStatus {
  nodes: {
    name: string;
    nodename: string;
    port: number;
    /** The recorded beam.smp runs. */
    running: boolean;
    /** The cluster (the first live node that answers) reports it running. */
    up: boolean;
  }[];
  /** The command queue of partition 0, when it exists, and the node holding its leader. */
  commandQueue?: { queue: string; leader?: string };
}

/** Each broker node up or down, and the leader of `commandQueue` (a quorum queue) if it exists. */
export async function brokerClusterStatus(
  record: UpRecord & { ha: HaInfo },
  commandQueue: string,
): Promise<BrokerClusterStatus> {
  const [running, leader] = await Promise.all([
    runningNames(record).catch(() => [] as string[]),
    quorumLeader(record, commandQueue, VHOST).catch(() => ({ found: false as const })),
  ]);
  return {
    nodes: record.ha.brokerNodes.map((n) => ({
      name: n.name,
      nodename: n.nodename,
      port: n.port,
      running: beamRuns(record, n.name),
      up: running.includes(n.name),
    })),
    ...(!leader.found
      ? {}
      : {
          commandQueue: {
            queue: commandQueue,
            ...(leader.leader === undefined ? {} : { leader: leader.leader }),
          },
        }),
  };
}
