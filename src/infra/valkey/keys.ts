/**
 * Every datastore key of a partition, built in one place from the contract's prefix
 * `matching:{matching-p<N>}:` so that one partition's keys share one hash slot. One
 * exception, by design: the fencing epoch counter lives under `fencing:{matching-p<N>}:`
 * (same hash slot) so that a reset of every `matching:*` key keeps it; a datastore user
 * restricted by ACL must be allowed `fencing:*` too.
 */

export interface PartitionKeys {
  prefix: string;
  processedCommand(commandId: string): string;
  acceptedOrder(orderId: string): string;
  bookRates(pairId: number, side: "bid" | "ask"): string;
  order(orderId: string): string;
  /** Extension: a stop order's hash (docs/orders.md), its fields those of `stopHashFields`. */
  stopOrder(orderId: string): string;
  /** Extension: a pair's stop book, order ids scored by sequence (arrival order). */
  stopBook(pairId: number): string;
  /** Extension: hash of halted pair ids to the halt's reason. */
  haltedPairs: string;
  events: string;
  /** Extension: the last per-partition sequence number given to an event (`seq` in the stream). */
  eventSequence: string;
  eventsDeadLetter: string;
  outboxLease: string;
  /** Extension: the conductor's ownership epoch (fencing token). */
  ownerEpoch: string;
  /** Extension: set of pair ids with resting orders or stops, so a reload knows which books to read. */
  pairs: string;
  /** Extension: the outbox's per-event publish attempt counters. */
  outboxAttempts: string;
  /** Extension: written by a batch of pure redeliveries so its durability wait has a write to cover. */
  conductorHeartbeat: string;
  /** Extension: the counter ownership epochs are drawn from; it survives a keyspace reset. */
  ownerEpochCounter: string;
  /**
   * Extension: how many batches were committed on the partition's history, checked and counted
   * by every commit, so that a batch never lands on a node that lacks the one before it.
   */
  commitCount: string;
  /** Extension: written by the outbox after each read so its durability wait has a write to cover. */
  outboxReadBarrier: string;
  /**
   * Extension: a marker written so that a durability wait has a write to cover (the boot
   * check's probe, the conductor's answer to a stored-result query).
   */
  durabilityProbe: string;
  /** Extension: the engine's time (epoch ms) as the last batch that moved it recorded it. */
  clock: string;
  /** Extension: hash of user ids to their armed dead-man's switch's deadline (epoch ms). */
  cancelAfter: string;
  /** Extension: hash of user ids whose switch fired, to its deadline, while orders remain. */
  cancelAfterSweeps: string;
  /**
   * Extension: every armed deadline, scored by it: `order:<id>`, `stop:<id>` (good-till-date),
   * `switch:<userId>`, `sweep:<userId>`. Any conductor reads the earliest in one call.
   */
  deadlines: string;
}

export const outboxConsumerGroup = "matching-outbox-v1";

export function partitionKeys(partition: number): PartitionKeys {
  const prefix = `matching:{matching-p${partition}}:`;
  return {
    prefix,
    processedCommand: (commandId) => `${prefix}processed-command:${commandId}`,
    acceptedOrder: (orderId) => `${prefix}accepted-order:${orderId}`,
    bookRates: (pairId, side) => `${prefix}book:${pairId}:${side}:rates`,
    order: (orderId) => `${prefix}order:${orderId}`,
    stopOrder: (orderId) => `${prefix}stop:${orderId}`,
    stopBook: (pairId) => `${prefix}book:${pairId}:stops`,
    haltedPairs: `${prefix}halted-pairs`,
    events: `${prefix}events`,
    eventSequence: `${prefix}events:sequence`,
    eventsDeadLetter: `${prefix}events:dead-letter`,
    outboxLease: `${prefix}outbox-lease`,
    ownerEpoch: `${prefix}owner-epoch`,
    pairs: `${prefix}pairs`,
    outboxAttempts: `${prefix}outbox-attempts`,
    conductorHeartbeat: `${prefix}conductor-heartbeat`,
    // Outside the `matching:` prefix on purpose, in the same hash slot: harnesses that delete
    // every `matching:*` key keep it, so an epoch is never issued twice (see claimOwnership).
    ownerEpochCounter: `fencing:{matching-p${partition}}:owner-epoch-counter`,
    commitCount: `fencing:{matching-p${partition}}:commit-count`,
    outboxReadBarrier: `${prefix}outbox-read-barrier`,
    durabilityProbe: `${prefix}durability-probe`,
    clock: `${prefix}clock`,
    cancelAfter: `${prefix}cancel-after`,
    cancelAfterSweeps: `${prefix}cancel-after:sweeps`,
    deadlines: `${prefix}deadlines`,
  };
}
