/**
 * What `bench failover --fault` kills besides the datastore (datastore-faults.ts), and how the
 * bench knows the system recovered: a broker node (the queue elects a leader elsewhere), or the
 * active conductor or outbox (the standby takes over; the victim restarts as the new standby).
 */
import { createValkey, parseInfo, type Valkey } from "../src/infra/valkey/client";
import { listedReplicas } from "../src/infra/valkey/fsync-policy";
import {
  brokerNodesRunning,
  currentPrimary,
  killBrokerNode,
  queueLeader,
  restartBrokerNode,
  type StackInfo,
} from "../src/stack/index";
import type { ServiceProcess } from "./services";

export interface FaultOutcome {
  killed: string;
  /** performance.now() just before the kill signal: the figures count from here. */
  killedAt: number;
  /** What took over: the promoted node, or the standby service. */
  promoted: string;
  /** Milliseconds from the kill until it took over. */
  promotedAfterMs: number;
  /** What holds the role once everything settled (Sentinel may switch twice). */
  settledOn: string;
  /** True when the victim is back (a replica again, or the new standby). */
  settled: boolean;
  /** Online replicas of the settled primary (datastore faults), else -1. */
  replicas: number;
}

export interface FaultDriver {
  /** Kills the current holder and waits until the system settled again. */
  inject(): Promise<FaultOutcome>;
}

/**
 * SIGKILLs a broker node: the command queue's leader every other time (the first included),
 * else the node killed least so far, so that each node dies at least three times in ten;
 * restarts it once the queue has a leader elsewhere, and settles when all nodes run again.
 */
export function brokerNodeFaults(info: StackInfo, queue: string): FaultDriver {
  let round = 0;
  const kills = new Map<string, number>();
  return {
    async inject() {
      const nodes = info.ha?.brokerNodes?.map((n) => n.name) ?? [];
      if (nodes.length < 3) throw new Error("--fault broker-node needs the HA stack's cluster");
      const leader = await queueLeader(info, queue);
      const leastKilled = [...nodes].sort((a, b) => (kills.get(a) ?? 0) - (kills.get(b) ?? 0))[0]!;
      const victim = round % 2 === 0 && leader !== undefined ? leader : leastKilled;
      kills.set(victim, (kills.get(victim) ?? 0) + 1);
      round++;
      const start = performance.now();
      await killBrokerNode(info, victim);
      let promoted: string | undefined;
      while (performance.now() - start < 60_000) {
        promoted = await queueLeader(info, queue).catch(() => undefined);
        if (promoted !== undefined && promoted !== victim) break;
        await Bun.sleep(100);
      }
      const promotedAfterMs = performance.now() - start;
      await restartBrokerNode(info, victim);
      const running = await brokerNodesRunning(info);
      return {
        killed: `${victim}${victim === leader ? " (queue leader)" : ""}`,
        killedAt: start,
        promoted: promoted ?? "none",
        promotedAfterMs,
        settledOn: (await queueLeader(info, queue).catch(() => undefined)) ?? "none",
        settled: running.length === nodes.length,
        replicas: -1,
      };
    },
  };
}

/** Two instances of one service, of which one is active; `start` adds one more. */
export interface ServicePool {
  kind: "conductor" | "outbox";
  instances: ServiceProcess[];
  start(): Promise<ServiceProcess>;
}

/** The pool's instances whose /readyz says active. */
async function activeOf(pool: ServicePool): Promise<ServiceProcess[]> {
  const roles = await Promise.all(
    pool.instances.map(async (service) => {
      try {
        const body = (await (
          await fetch(`${service.url}/readyz`, { signal: AbortSignal.timeout(1000) })
        ).json()) as { role?: string };
        return body.role;
      } catch {
        return undefined;
      }
    }),
  );
  return pool.instances.filter((_, i) => roles[i] === "active");
}

/** The active instance's URL (the only one whose books are current), else the first one's. */
export async function activeUrl(pool: ServicePool): Promise<string> {
  const [active] = await activeOf(pool);
  return (active ?? pool.instances[0]!).url;
}

/** SIGKILLs the active instance; the standby takes over; the victim's replacement stands by. */
export function serviceFaults(pool: ServicePool): FaultDriver {
  const name = (service: ServiceProcess) => `${pool.kind}@${new URL(service.url).port}`;
  return {
    async inject() {
      const [victim] = await activeOf(pool);
      if (victim === undefined) throw new Error(`no active ${pool.kind} to kill`);
      const start = performance.now();
      victim.kill();
      await victim.exited;
      pool.instances.splice(pool.instances.indexOf(victim), 1);
      let promoted: ServiceProcess | undefined;
      while (promoted === undefined && performance.now() - start < 60_000) {
        [promoted] = await activeOf(pool);
        if (promoted === undefined) await Bun.sleep(50);
      }
      const promotedAfterMs = performance.now() - start;
      const replacement = await pool.start();
      return {
        killed: name(victim),
        killedAt: start,
        promoted: promoted === undefined ? "none" : name(promoted),
        promotedAfterMs,
        settledOn: promoted === undefined ? "none" : name(promoted),
        settled: promoted !== undefined && replacement !== undefined,
        replicas: -1,
      };
    },
  };
}

/**
 * Waits until the primary the Sentinels name lists `count` online replicas, and each of them
 * fsyncs again: a replica listed online may still be loading a full resync's snapshot and
 * rewriting its AOF, and a fault then would find it unable to acknowledge anything. A publish
 * (replicated, no key) and a WAITAOF for `count` replicas tell.
 */
export async function waitForSettledPrimary(
  info: StackInfo,
  count: number,
  timeoutMs: number,
): Promise<{ ok: boolean; name: string; replicas: number }> {
  const deadline = performance.now() + timeoutMs;
  let last = { ok: false, name: "?", replicas: 0 };
  while (performance.now() < deadline) {
    try {
      const primary = await currentPrimary(info);
      const node = createValkey(`redis://127.0.0.1:${primary.port}`, {
        name: "matchd-bench-failover-watch",
      });
      node.on("error", () => undefined);
      const { primaryNow, online, fsyncing } = await settledState(node, count).finally(() =>
        node.disconnect(),
      );
      last = { ok: primaryNow && fsyncing, name: primary.name, replicas: online };
      if (last.ok) return last;
    } catch {
      // A node or Sentinel in the middle of a switch: asked again.
    }
    await Bun.sleep(200);
  }
  return last;
}

/** Whether the node is a primary, its online replicas, and whether `count` of them fsync. */
async function settledState(node: Valkey, count: number) {
  const replication = parseInfo(await node.info("replication"));
  const online = listedReplicas(replication).filter((r) => r.state === "online").length;
  const primaryNow = replication.get("role") === "master";
  return { primaryNow, online, fsyncing: online >= count && (await fsyncs(node, count)) };
}

/** Whether `count` replicas fsync a write made now, within a second. */
async function fsyncs(node: Valkey, count: number): Promise<boolean> {
  await node.publish("matchd-bench-settle", "1");
  const [, replicas] = (await node.call("WAITAOF", "0", String(count), "1000")) as number[];
  return (replicas ?? 0) >= count;
}
