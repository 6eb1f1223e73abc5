/**
 * The rule that keeps an acknowledged write across every promotion Sentinel makes: a
 * durability wait needs the fsync of every replica that Sentinel could still promote, and
 * nothing is acknowledged on a primary that the Sentinels no longer name, or are failing over.
 *
 * With Sentinels (sentinelReplicaRule), a replica counts until the Sentinels themselves say
 * it cannot be promoted (leftOut): flagged down, without a link or never read by a majority
 * at the latest configuration epoch; or answering as a primary, or of replica-priority 0, by
 * every Sentinel (or the failover's leader among them). A replica that merely lost its link
 * to the primary still counts: `SENTINEL FAILOVER` and a promotion after a freeze or a
 * partition start exactly so. The Sentinel leading a failover names the old primary until
 * the failover ends, seconds after the promotion: the replica it promoted is current
 * meanwhile (promotedWatched).
 *
 * WAITAOF counts replicas, not names: the fsync of any replica connected to the primary
 * counts. So a wait needs every counted replica plus every left-out one the primary lists
 * acknowledging (standIns); then no left-out replica can answer in place of a promotable one.
 * docs/durability.md argues it.
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

/** A replica as one Sentinel knows it (SENTINEL REPLICAS). */
export interface SentinelReplica {
  /** The address Sentinel announces for it, `ip:port`. */
  address: string;
  flags: readonly string[];
  /** `role-reported`: the role the server last reported to Sentinel (`slave`, `master`). */
  roleReported: string;
  /** Its run id as Sentinel last read it; empty before the first INFO. */
  runId?: string;
  /** `slave-priority`: 0 means Sentinel never promotes it. */
  priority?: number;
  /**
   * `info-refresh`: ms since Sentinel last read its INFO; 0 when it never has (since this
   * Sentinel learnt of it, e.g. the old primary re-added after a failover).
   */
  infoRefreshMs?: number;
}

/** One Sentinel's answer about the monitored primary (SENTINEL MASTER and SENTINEL REPLICAS). */
export interface SentinelReplicaView {
  /** The primary it names, `ip:port`. */
  master: string;
  /** That primary's run id as Sentinel last read it; empty before the first INFO. */
  masterRunId?: string;
  /** The configuration epoch of that answer: a Sentinel behind the others has a lower one. */
  configEpoch: number;
  /** Its flags for the primary: `master`, `s_down`, `o_down`, `failover_in_progress`, ... */
  masterFlags: readonly string[];
  /** Its down-after-milliseconds for the primary. */
  downAfterMs?: number;
  replicas: readonly SentinelReplica[];
}

export interface SentinelRuleInput {
  /** The server the durability waits run on, `ip:port` as the Sentinels announce it. */
  watched: string;
  /** Its INFO replication list: the replicas whose fsync WAITAOF can count. */
  listed: readonly ListedReplica[];
  /** The Sentinels that answered. */
  views: readonly SentinelReplicaView[];
  /** Sentinels in the URL: exclusions need a majority of them to answer. */
  sentinels: number;
}

export type SentinelRuleOutcome =
  | {
      kind: "required";
      replicas: number;
      /** Replicas Sentinel could promote: each one's fsync must be among those counted. */
      counted: string[];
      /** Replicas Sentinel cannot promote. */
      excluded: string[];
      /** Excluded replicas the primary lists acknowledging: WAITAOF counts their fsyncs too. */
      standIns: string[];
    }
  | { kind: "violated"; reason: string };

const cannotBePromoted = new Set(["s_down", "o_down", "disconnected"]);
const failingOver = new Set(["o_down", "failover_in_progress"]);

/**
 * The address the Sentinels announce for the server with run id `runId` (the primary or a
 * replica they know), or undefined when none of them knows that run id yet. The socket's own
 * address differs from it behind NAT, with hostnames or with `replica-announce-ip`.
 */
export function announcedAddress(
  views: readonly SentinelReplicaView[],
  runId: string,
): string | undefined {
  if (runId === "") return undefined;
  for (const view of views) {
    if (view.masterRunId === runId) return view.master;
    const replica = view.replicas.find((r) => r.runId === runId);
    if (replica !== undefined) return replica.address;
  }
  return undefined;
}

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

/** Why the Sentinels forbid acknowledging on `watched` at all, or undefined. */
function forbidden(watched: string, views: readonly SentinelReplicaView[]): string | undefined {
  // A Sentinel that has not heard of the latest promotion yet (a lower epoch) names the old
  // primary for a second or two: only the latest configuration says which one is current.
  const latest = Math.max(...views.map((v) => v.configEpoch));
  const elsewhere = views.find(
    (v) => v.configEpoch === latest && v.master !== watched && !promotedWatched(v, watched),
  );
  if (elsewhere !== undefined)
    return `a Sentinel names ${elsewhere.master} the primary, not ${watched}`;
  // Flags for the primary a Sentinel names: a lagging one's flags for the old primary say
  // nothing about the new one (and the latest configuration decided above which is current).
  const failing = views.find(
    (v) => v.master === watched && v.masterFlags.some((flag) => failingOver.has(flag)),
  );
  if (failing === undefined) return undefined;
  return `a Sentinel is failing ${watched} over (flags ${failing.masterFlags.join(",")})`;
}

/**
 * Why one Sentinel will not promote `address`: "down" (flagged s_down, o_down or without a
 * link, or never read: Sentinel promotes no replica whose INFO it has not read within its
 * validity time, and one it never read has no INFO at all), "role" (it answers as a primary,
 * or it is the primary this Sentinel's failover replaces), "priority" (replica-priority 0),
 * or undefined.
 */
function notPromotable(
  view: SentinelReplicaView,
  address: string,
  watched: string,
): "down" | "role" | "priority" | undefined {
  if (address === view.master && promotedWatched(view, watched)) return "role";
  const seen = view.replicas.find((r) => r.address === address);
  if (seen === undefined) return undefined;
  if (seen.flags.some((f) => cannotBePromoted.has(f))) return "down";
  if (seen.infoRefreshMs === 0) return "down";
  if (seen.roleReported === "master") return "role";
  if (seen.priority === 0) return "priority";
  return undefined;
}

/**
 * Whether the Sentinels' word leaves `address` out. Down needs a majority at the latest
 * epoch, every one of them agreeing: Sentinel promotes no replica it sees down, and a
 * failover needs a majority's votes. A role or a priority needs more: every Sentinel in the
 * URL at the latest epoch, or the leader of the failover that promoted `watched` among them.
 * A Sentinel that did not answer may be leading a failover that promoted that very replica,
 * while the others, not told yet, see only a replica reporting master.
 */
function leftOut(
  address: string,
  watched: string,
  current: readonly SentinelReplicaView[],
  sentinels: number,
): boolean {
  const majority = Math.floor(sentinels / 2) + 1;
  if (current.length < majority) return false;
  const reasons = current.map((view) => notPromotable(view, address, watched));
  if (reasons.some((r) => r === undefined)) return false;
  if (reasons.every((r) => r === "down")) return true;
  return current.length === sentinels || current.some((view) => promotedWatched(view, watched));
}

/**
 * The replica rule with Sentinels; see the file's header. WAITAOF counts the fsync of any
 * replica connected to the primary, so a replica left out but still listed could answer in
 * place of one Sentinel may promote: whenever a promotable replica is needed, every left-out
 * replica the primary lists acknowledging is needed too.
 */
export function sentinelReplicaRule(input: SentinelRuleInput): SentinelRuleOutcome {
  const { watched, views } = input;
  const reason = forbidden(watched, views);
  if (reason !== undefined) return { kind: "violated", reason };
  const lags = new Map(input.listed.map((r) => [`${r.ip}:${r.port}`, r.lag]));
  const candidates = new Set(lags.keys());
  for (const view of views) for (const replica of view.replicas) candidates.add(replica.address);
  candidates.delete(watched);
  const latest = Math.max(...views.map((v) => v.configEpoch));
  const current = views.filter((v) => v.configEpoch === latest);
  const counted: string[] = [];
  const excluded: string[] = [];
  for (const address of [...candidates].sort()) {
    if (leftOut(address, watched, current, input.sentinels)) excluded.push(address);
    else counted.push(address);
  }
  // A left-out replica that acknowledged within the lag limit can answer a wait now. One
  // silent for longer (frozen, say) is not counted: counting it would hold every wait until
  // the primary drops it (repl-timeout, 60 s), and docs/durability.md says what that leaves.
  const downAfter = views.map((v) => v.downAfterMs).filter((ms) => ms !== undefined);
  const lagLimitS = replicaLagLimitS(downAfter.length === 0 ? undefined : Math.max(...downAfter));
  const standIns = excluded.filter((address) => {
    const lag = lags.get(address);
    // An unreadable lag (NaN) counts: only a lag known to be past the limit leaves it out.
    return lag !== undefined && !(lag > lagLimitS);
  });
  // No promotable replica: nothing Sentinel can promote could lack a write; any one replica's
  // fsync keeps the policy's floor.
  const replicas = counted.length === 0 ? 1 : counted.length + standIns.length;
  return { kind: "required", replicas, counted, excluded, standIns };
}
