/**
 * The rule that keeps an acknowledged write across the promotion Sentinel makes: a durability
 * wait needs the fsync of every replica that Sentinel could still promote, not of any one.
 *
 * WAITAOF 1 1 proves that one replica has the write, but with two replicas Sentinel may
 * promote the other: it ranks candidates by the replication offsets of its last INFO, which
 * can predate the primary's death. So a wait asks for every healthy replica (at least one):
 * one the primary lists online whose last acknowledgement is at most `lagLimitS` seconds old.
 * A replica that stops acknowledging for longer is one Sentinel has marked down (it stops
 * answering pings too) when the limit is above Sentinel's down-after-milliseconds, and
 * Sentinel never promotes a replica it holds down; until then waits time out and nothing is
 * acknowledged. A replica that has lost its link to the primary (state not online) is left
 * out at once: it cannot confirm anything, and its offset falls behind the others', which
 * Sentinel ranks first.
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
