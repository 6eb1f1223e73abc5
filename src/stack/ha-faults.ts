// Faults of the HA datastore that are not crashes, for tests and `bench failover`: a planned
// handover (SENTINEL FAILOVER), a frozen server (SIGSTOP and SIGCONT), a network partition
// between one server and its peers (iptables DROP rules on loopback, by the source address
// each server's outgoing connections use), and a Sentinel's restart.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { recordedProcess } from "./ha";
import { isRunning, StackError, signalGroup } from "./process";
import { haRecord, type StackInfo, withDirLock, writeRecord } from "./record";
import { restartSentinelProcess, withClient } from "./valkey";

/** SIGSTOPs a data node or Sentinel and its group: it keeps its sockets and answers nothing. */
export function freezeNode(info: StackInfo, name: string): void {
  const target = recordedProcess(info, name);
  if (isRunning(target.pid, target.startTicks)) signalGroup(target.pid, "SIGSTOP");
}

/** SIGCONTs what freezeNode stopped: it wakes up with its clients still connected. */
export function thawNode(info: StackInfo, name: string): void {
  const target = recordedProcess(info, name);
  if (isRunning(target.pid, target.startTicks)) signalGroup(target.pid, "SIGCONT");
}

/**
 * Asks a Sentinel for a planned failover (SENTINEL FAILOVER): it promotes a replica while the
 * primary stays up and connected. Sentinel refuses while a failover is under way or no
 * replica is fit yet (a node that just rejoined): asked again until `timeoutMs`.
 */
export async function handOver(info: StackInfo, timeoutMs = 30_000): Promise<void> {
  const { ha } = haRecord(info);
  const deadline = performance.now() + timeoutMs;
  let last = "no Sentinel answered";
  while (performance.now() < deadline) {
    for (const sentinel of ha.sentinels) {
      try {
        await withClient(
          `redis://${sentinel.host}:${sentinel.port}`,
          (client) => client.call("SENTINEL", "FAILOVER", ha.masterName),
          { commandTimeoutMs: 1000 },
        );
        return;
      } catch (error) {
        last = `${sentinel.name}: ${(error as Error).message}`;
      }
    }
    await Bun.sleep(250);
  }
  throw new StackError("no-sentinel", `no Sentinel started a planned failover: ${last}`);
}

/** Starts a killed Sentinel again from its config file as it rewrote it, and records it. */
export async function restartSentinel(info: StackInfo, name: string): Promise<void> {
  await withDirLock(info.dir, `restart ${name}`, async () => {
    const record = haRecord(info);
    const sentinel = record.ha.sentinels.find((s) => s.name === name);
    if (sentinel === undefined) throw new StackError("not-ha", `no sentinel ${name}`);
    const old = record.processes.find((p) => p.name === name);
    if (old !== undefined && isRunning(old.pid, old.startTicks)) {
      throw new StackError("node-running", `${name} still runs (pid ${old.pid}); kill it first`);
    }
    await restartSentinelProcess({
      dir: `${info.dir}/${name}`,
      port: sentinel.port,
      onSpawn: (spawned) => {
        const entry = { name, ...spawned, group: true };
        const processes = record.processes.filter((p) => p.name !== name).concat(entry);
        writeRecord({ ...record, processes, pids: { ...record.pids, [name]: spawned.pid } });
      },
    });
  });
}

/** Whom a partition cuts a data node off from. */
export type PartitionPeers = "sentinels" | "sentinels-and-replicas";

/** The iptables rules a partition added, kept in the stack's directory until healed. */
const rulesFile = (dir: string) => `${dir}/partition-rules.json`;

/**
 * Cuts data node `name` off from the Sentinels (and the other data nodes) while clients on
 * 127.0.0.1, matchd among them, still reach it: packets between its port and the peers'
 * source addresses are dropped both ways, established connections included. Needs root.
 */
export function cutOff(info: StackInfo, name: string, peers: PartitionPeers): void {
  const { ha } = haRecord(info);
  const node = dataNode(info, name);
  const others = [
    ...ha.sentinels,
    ...(peers === "sentinels" ? [] : ha.nodes.filter((n) => n.name !== name)),
  ];
  dropBetween(info, node, others);
}

/**
 * Cuts the link between data nodes `a` and `b` only (a replica's replication link to its
 * primary, whichever of the two is the primary); both still reach the Sentinels and matchd.
 */
export function cutLink(info: StackInfo, a: string, b: string): void {
  const [first, second] = [dataNode(info, a), dataNode(info, b)];
  dropBetween(info, first, [second]);
  dropBetween(info, second, [first]);
}

type Endpoint = { host: string; port: number; source?: string };

function dataNode(info: StackInfo, name: string): Endpoint {
  const node = haRecord(info).ha.nodes.find((n) => n.name === name);
  if (node === undefined) throw new StackError("not-ha", `no data node ${name}`);
  return node;
}

/** Drops packets between `node`'s port and the peers' source addresses, both ways. */
function dropBetween(info: StackInfo, node: Endpoint, peers: readonly Endpoint[]): void {
  const sources = peers.map((o) => o.source);
  if (sources.some((s) => s === undefined)) {
    throw new StackError("not-ha", "this stack predates source addresses: start it again");
  }
  const rules = (sources as string[]).flatMap((source) => [
    ["-s", source, "-d", node.host, "-p", "tcp", "--dport", String(node.port)],
    ["-s", node.host, "-d", source, "-p", "tcp", "--sport", String(node.port)],
  ]);
  // Added to what earlier cuts left: heal removes them all.
  const file = rulesFile(info.dir);
  const added: string[][] = existsSync(file)
    ? (JSON.parse(readFileSync(file, "utf8")) as string[][])
    : [];
  try {
    for (const rule of rules) {
      iptables(["-I", "INPUT", ...rule, "-j", "DROP"]);
      added.push(rule);
    }
  } finally {
    writeFileSync(file, JSON.stringify(added));
  }
}

/** Removes every rule cutOff and cutLink added in this stack (also at `stack down`). */
export function heal(dir: string): void {
  const file = rulesFile(dir);
  if (!existsSync(file)) return;
  const rules = JSON.parse(readFileSync(file, "utf8")) as string[][];
  for (const rule of rules) iptables(["-D", "INPUT", ...rule, "-j", "DROP"], true);
  rmSync(file);
}

function iptables(args: string[], quiet = false): void {
  const run = spawnSync("iptables", ["-w", ...args], { encoding: "utf8" });
  if (run.status === 0 || quiet) return;
  const why = run.error?.message ?? run.stderr.trim();
  throw new StackError("partition", `iptables ${args.join(" ")} failed: ${why}`);
}
