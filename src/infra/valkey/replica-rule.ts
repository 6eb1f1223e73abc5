/**
 * The rule that keeps an acknowledged write across every promotion Sentinel makes: a
 * durability wait needs the fsync of every replica that Sentinel could still promote, and
 * nothing is acknowledged on a primary that the Sentinels no longer name, or are failing over.
 *
 * With Sentinels (sentinelReplicaRule), a replica counts until the Sentinels themselves say
 * it cannot be promoted: a majority of them answer with the latest configuration (epoch), and
 * every one of those flags it down (s_down, o_down) or without a link (disconnected), which
 * Sentinel never promotes, or reports
 * it answering as a primary (a demoted primary not yet turned into a replica: Sentinel ranks it
 * below every replica that follows the primary, by its stale replication offset). A replica
 * that merely lost its link to the primary still counts: `SENTINEL FAILOVER` and a promotion
 * after a freeze or a partition start exactly so, with the chosen replica detached by
 * `REPLICAOF NO ONE` while it is healthy. The Sentinel leading a failover names the old
 * primary until the failover ends, seconds after the promotion: the replica it promoted is
 * current meanwhile (promotedWatched). docs/durability.md argues it.
 *
 * Without Sentinels (no automatic promotion) the older rule stands: every replica the primary
 * lists online whose last acknowledgement is at most `lagLimitS` seconds old.
 */
import type { ListedReplica } from "./fsync-policy";

/** The lag limit without Sentinel (no automatic promotion): two missed acknowledgements. */
export const defaultReplicaLagLimitS = 2;

/** The lag limit that waits out Sentinel's down-after period before leaving a replica out. */
export function replicaLagLimitS(downAfterMs: number | undefined): number {
  if (downAfterMs === undefined) return defaultReplicaLagLimitS;
  return Math.max(defaultReplicaLagLimitS, Math.ceil(downAfterMs / 1000) + 1);
}

/** Healthy replicas: listed online, acknowledged within the limit. */
export function healthyReplicas(listed: readonly ListedReplica[], lagLimitS: number): number {
  return listed.filter((r) => r.state === "online" && r.lag <= lagLimitS).length;
}

/** How many replica fsyncs a durability wait needs: every healthy replica, never fewer than 1. */
export function requiredReplicaFsyncs(listed: readonly ListedReplica[], lagLimitS: number): number {
  return Math.max(1, healthyReplicas(listed, lagLimitS));
}

/** One Sentinel's answer about the monitored primary (SENTINEL MASTER and SENTINEL REPLICAS). */
export interface SentinelReplicaView {
  /** The primary it names, `ip:port`. */
  master: string;
  /** The configuration epoch of that answer: a Sentinel behind the others has a lower one. */
  configEpoch: number;
  /** Its flags for the primary: `master`, `s_down`, `o_down`, `failover_in_progress`, ... */
  masterFlags: readonly string[];
  /** `roleReported`: the role the server last reported to Sentinel (`slave`, `master`). */
  replicas: readonly { address: string; flags: readonly string[]; roleReported: string }[];
}

export interface SentinelRuleInput {
  /** The server the durability waits run on, `ip:port`. */
  watched: string;
  /** Its INFO replication list. */
  listed: readonly ListedReplica[];
  /** The Sentinels that answered. */
  views: readonly SentinelReplicaView[];
  /** Sentinels in the URL: exclusions need a majority of them to answer. */
  sentinels: number;
}

export type SentinelRuleOutcome =
  | { kind: "required"; replicas: number; counted: string[]; excluded: string[] }
  | { kind: "violated"; reason: string };

const cannotBePromoted = new Set(["s_down", "o_down", "disconnected"]);
const failingOver = new Set(["o_down", "failover_in_progress"]);

/**
 * True when this Sentinel's own failover promoted `watched`: the leader names the old primary
 * until it has reconfigured every replica (seconds), with the new epoch already. The replica
 * it flags `promoted` that answers as a primary is past the point where a failover can be
 * aborted (Sentinel aborts only before it sees the promotion), so it is the new primary.
 */
function promotedWatched(view: SentinelReplicaView, watched: string): boolean {
  return view.replicas.some(
    (r) => r.address === watched && r.flags.includes("promoted") && r.roleReported === "master",
  );
}

/** The replica rule with Sentinels; see the file's header. */
export function sentinelReplicaRule(input: SentinelRuleInput): SentinelRuleOutcome {
  const { watched, views } = input;
  // A Sentinel that has not heard of the latest promotion yet (a lower epoch) names the old
  // primary for a second or two: only the latest configuration says which one is current.
  const latest = Math.max(...views.map((v) => v.configEpoch));
  const elsewhere = views.find(
    (v) => v.configEpoch === latest && v.master !== watched && !promotedWatched(v, watched),
  );
  if (elsewhere !== undefined) {
    return {
      kind: "violated",
      reason: `a Sentinel names ${elsewhere.master} the primary, not ${watched}`,
    };
  }
  // Flags for the primary a Sentinel names: a lagging one's flags for the old primary say
  // nothing about the new one (and the latest configuration decided above which is current).
  const failing = views.find(
    (v) => v.master === watched && v.masterFlags.some((flag) => failingOver.has(flag)),
  );
  if (failing !== undefined) {
    return {
      kind: "violated",
      reason: `a Sentinel is failing ${watched} over (flags ${failing.masterFlags.join(",")})`,
    };
  }
  const candidates = new Set(input.listed.map((r) => `${r.ip}:${r.port}`));
  for (const view of views) for (const replica of view.replicas) candidates.add(replica.address);
  candidates.delete(watched);
  // Leaving a replica out takes the word of a majority that knows the latest configuration.
  const current = views.filter((v) => v.configEpoch === latest);
  const majority = Math.floor(input.sentinels / 2) + 1;
  const counted: string[] = [];
  const excluded: string[] = [];
  for (const address of [...candidates].sort()) {
    const flagged = current.every((view) => {
      // The primary a Sentinel's failover is replacing: that Sentinel will not promote it.
      if (address === view.master && promotedWatched(view, watched)) return true;
      const seen = view.replicas.find((r) => r.address === address);
      if (seen === undefined) return false;
      return seen.roleReported === "master" || seen.flags.some((f) => cannotBePromoted.has(f));
    });
    if (current.length >= majority && flagged) excluded.push(address);
    else counted.push(address);
  }
  return { kind: "required", replicas: Math.max(1, counted.length), counted, excluded };
}
