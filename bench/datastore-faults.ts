/**
 * The HA datastore's faults for `bench failover --fault`, crashes and the ones that are not:
 * each acts on the current primary (or a replica, or a Sentinel), waits for what Sentinel
 * does about it, lets the victim recover, and returns once the set has healed (the primary
 * the Sentinels name lists both replicas online again).
 */
import {
  currentPrimary,
  cutLink,
  cutOff,
  freezeNode,
  handOver,
  heal,
  killSentinel,
  killValkeyNode,
  restartSentinel,
  restartValkeyNode,
  type StackInfo,
  thawNode,
  waitForFailover,
} from "../src/stack/index";
import type { DatastoreFaultKind } from "./boundaries/failover";
import { type FaultDriver, type FaultOutcome, waitForSettledPrimary } from "./fault-drivers";

/** How long a healed partition or a thawed node waited after the promotion (the 5 s). */
export const partitionHealAfterMs = 5000;
/** How long a killed replica or Sentinel stays down before its restart. */
const downForMs = 2000;

/** Takes the kinds in turn, one per fault. */
export function datastoreFaults(
  info: StackInfo,
  kinds: readonly DatastoreFaultKind[],
): FaultDriver {
  let round = 0;
  return {
    inject: () => {
      const kind = kinds[round % kinds.length]!;
      const sentinel = Math.floor(round / kinds.length) % 3;
      round++;
      if (kind === "replica-kill") return replicaKill(info);
      if (kind === "sentinel-kill") return sentinelKill(info, sentinel);
      if (kind === "replica-standin" || kind === "two-faults") return twoFaults(info, kind);
      return primaryFault(info, kind);
    },
  };
}

/** Faults of one node at a time. */
type PrimaryFaultKind = Exclude<
  DatastoreFaultKind,
  "replica-kill" | "sentinel-kill" | "replica-standin" | "two-faults"
>;

/** What a primary fault does to the victim, and how the victim recovers after the promotion. */
function primaryActions(
  info: StackInfo,
  kind: PrimaryFaultKind,
  victim: string,
): { act: () => Promise<void>; recover: () => Promise<void> } {
  switch (kind) {
    case "primary-handover":
      return { act: () => handOver(info), recover: async () => undefined };
    case "primary-freeze":
      return {
        act: async () => freezeNode(info, victim),
        recover: async () => thawNode(info, victim),
      };
    case "primary-partition":
    case "primary-isolate":
      return {
        act: async () =>
          cutOff(
            info,
            victim,
            kind === "primary-partition" ? "sentinels" : "sentinels-and-replicas",
          ),
        recover: async () => {
          await Bun.sleep(partitionHealAfterMs);
          heal(info.dir);
        },
      };
    default:
      return {
        act: () => killValkeyNode(info, victim),
        recover: () => restartValkeyNode(info, victim),
      };
  }
}

async function primaryFault(info: StackInfo, kind: PrimaryFaultKind): Promise<FaultOutcome> {
  const victim = await currentPrimary(info);
  const { act, recover } = primaryActions(info, kind, victim.name);
  return promotionFault(info, victim.name, `${victim.name} (${kind})`, { act, recover });
}

/**
 * A fault that leads to a promotion: acts, waits for Sentinel to promote a replica of
 * `victim`, lets the victim recover, waits until the set settled. A fault that did not lead to
 * a promotion still ends: the victim recovers either way.
 */
async function promotionFault(
  info: StackInfo,
  victim: string,
  killed: string,
  { act, recover }: { act: () => Promise<void>; recover: () => Promise<void> },
): Promise<FaultOutcome> {
  const start = performance.now();
  try {
    await act();
    const promoted = await waitForFailover(info, { from: victim, timeoutMs: 30_000 });
    const promotedAfterMs = performance.now() - start;
    await recover();
    const settled = await waitForSettledPrimary(info, 2, 60_000);
    return {
      killed,
      killedAt: start,
      promoted: promoted.name,
      promotedAfterMs,
      settledOn: settled.name,
      settled: settled.ok,
      replicas: settled.replicas,
    };
  } catch (error) {
    await recover().catch(() => undefined);
    throw error;
  }
}

/** SIGKILLs a replica of the current primary, restarts it after a while, waits for its rejoin. */
async function replicaKill(info: StackInfo): Promise<FaultOutcome> {
  const primary = await currentPrimary(info);
  const victim = info.ha!.nodes.find((n) => n.name !== primary.name)!.name;
  return killAndRestart(info, `${victim} (replica-kill)`, primary.name, {
    kill: () => killValkeyNode(info, victim),
    restart: () => restartValkeyNode(info, victim),
  });
}

/** SIGKILLs one Sentinel, restarts it after a while, waits until the set is whole again. */
async function sentinelKill(info: StackInfo, index: number): Promise<FaultOutcome> {
  const victim = info.ha!.sentinels[index]!.name;
  return killAndRestart(info, `${victim} (sentinel-kill)`, undefined, {
    kill: () => killSentinel(info, victim),
    restart: () => restartSentinel(info, victim),
  });
}

/**
 * A fault with no promotion: kill, stay down a while, restart, wait until the set settled
 * (on `primary` when given: the same primary must still serve).
 */
async function killAndRestart(
  info: StackInfo,
  killed: string,
  primary: string | undefined,
  { kill, restart }: { kill: () => Promise<unknown>; restart: () => Promise<unknown> },
): Promise<FaultOutcome> {
  const start = performance.now();
  await kill();
  await Bun.sleep(downForMs);
  await restart();
  const settled = await waitForSettledPrimary(info, 2, 60_000);
  return {
    killed,
    killedAt: start,
    promoted: "none (no promotion)",
    promotedAfterMs: 0,
    settledOn: settled.name,
    settled: settled.ok && (primary === undefined || settled.name === primary),
    replicas: settled.replicas,
  };
}

/** How long the stand-in is cut off before the second fault: past down-after (1 s) and a round. */
const standInLeftOutMs = 3000;
/** How long the primary's link to the replica Sentinel will promote is cut before the kill. */
const stalledLinkMs = 1500;
/** How long after the promotion the stand-in's partition is healed. */
const twoFaultsHealAfterMs = 2000;

/**
 * Two faults at once. Both first cut one replica (the stand-in) off from the Sentinels only:
 * it still replicates, and the Sentinels flag it down. Then `replica-standin` cuts the link
 * between the primary and the other replica (the one Sentinel can promote) and SIGKILLs the
 * primary 1.5 s later; `two-faults` asks for a planned handover. Everything heals 2 s after the
 * promotion; the killed primary is restarted then.
 */
async function twoFaults(
  info: StackInfo,
  kind: "replica-standin" | "two-faults",
): Promise<FaultOutcome> {
  const victim = (await currentPrimary(info)).name;
  const replicas = info.ha!.nodes.filter((n) => n.name !== victim).map((n) => n.name);
  const [standIn, promotable] = replicas as [string, string];
  let killed = false;
  cutOff(info, standIn, "sentinels");
  await Bun.sleep(standInLeftOutMs);
  return promotionFault(info, victim, `${victim}, ${standIn} left out (${kind})`, {
    act: async () => {
      if (kind === "two-faults") return handOver(info);
      cutLink(info, victim, promotable);
      await Bun.sleep(stalledLinkMs);
      await killValkeyNode(info, victim);
      killed = true;
    },
    recover: async () => {
      await Bun.sleep(twoFaultsHealAfterMs);
      heal(info.dir);
      if (killed) await restartValkeyNode(info, victim);
    },
  });
}
