/**
 * Judges a failover run: the invariants every failover must keep (nothing acknowledged lost,
 * no phantom event or reply, every event once, the books equal the pure engine's replay) and
 * the figures per kill (time until commands are acknowledged and events flow again, p99
 * before, around and after).
 */
import { datastoreFaultKinds, faultList } from "./boundaries/failover";
import type { FailoverObservation, FaultRecord } from "./failover";
import { LatencyHistogram, type Percentiles } from "./histogram";
import type { BenchReport } from "./report";

/** The issue's bar: acknowledged again within 3 s of a kill (median), never beyond 10 s. */
export const failoverTargets = { medianAckedAgainMs: 3000, maxAckedAgainMs: 10_000 };

/**
 * The bar once Sentinel named the new primary: replies and events again within 1 s of the
 * promotion (median), never beyond 2 s.
 */
export const afterPromotionTargets = { medianMs: 1000, maxMs: 2000 };

/** Whether every list meets afterPromotionTargets (a missing figure, infinite, never does). */
function afterPromotionMet(lists: number[][]): boolean {
  return lists.every(
    (values) =>
      median(values) <= afterPromotionTargets.medianMs &&
      Math.max(...values) <= afterPromotionTargets.maxMs,
  );
}

/** The reply latencies of commands scheduled in [fromMs, toMs). */
function window(o: FailoverObservation, fromMs: number, toMs: number): Percentiles {
  const histogram = new LatencyHistogram();
  for (let i = 0; i < o.scheduledMs.length; i++) {
    const at = o.scheduledMs[i]!;
    if (at >= fromMs && at < toMs && o.repliedMs[i]! > 0)
      histogram.record((o.repliedMs[i]! - at) * 1e6);
  }
  return histogram.percentilesMs();
}

export interface FaultRow extends FaultRecord {
  p99BeforeMs: number;
  p99AroundMs: number;
  p99AfterMs: number;
}

/**
 * Before: the 2 s up to 0.5 s before the kill (commands whose replies the kill could delay are
 * "around"); around: from then until 1 s after acks resumed; after: the 2 s past that.
 */
function faultRows(o: FailoverObservation): FaultRow[] {
  return o.faults.map((fault) => {
    const resumed = fault.atMs + (fault.ackedAgainMs ?? 0) + 1000;
    return {
      ...fault,
      p99BeforeMs: window(o, fault.atMs - 2500, fault.atMs - 500).p99,
      p99AroundMs: window(o, fault.atMs - 500, resumed).p99,
      p99AfterMs: window(o, resumed, resumed + 2000).p99,
    };
  });
}

/** A promotion followed by another before the set settled; a fault with no promotion has none. */
function switchedAgain(row: { promoted: string; settledOn: string }): boolean {
  return !row.promoted.startsWith("none") && row.settledOn !== row.promoted;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** The invariants of the issue's list, each a pass/fail with the count behind it. */
export function failoverInvariants(o: FailoverObservation): BenchReport["invariants"] {
  const n = o.sent.length;
  let missingResults = 0;
  let ackedLost = 0;
  let repliesUnlikeStored = 0;
  let expectedEvents = 0;
  let unreplied = 0;
  let eventsWithoutResult = 0;
  for (let i = 0; i < n; i++) {
    const stored = o.stored[i];
    const replied = o.replyBodies[i];
    if (replied === undefined) unreplied++;
    if (stored === null || stored === undefined) {
      missingResults++;
      if (replied !== undefined) ackedLost++;
      if (o.firstEventMs[i]! > 0) eventsWithoutResult++;
      continue;
    }
    if (replied !== undefined && !sameResult(replied, stored)) repliesUnlikeStored++;
    expectedEvents += eventsOf(stored);
  }
  const distinct = o.eventHashes.size;
  const rows = faultRows(o);
  const acked = rows.map((r) => r.ackedAgainMs ?? Number.POSITIVE_INFINITY);
  const { reusedSequences, eventsFromTwoCommits } = o.commits;
  const checks = {
    commandsWithoutStoredResult: [missingResults, missingResults === 0],
    acknowledgedCommandsLost: [ackedLost, ackedLost === 0],
    // What consumers saw of commits the final primary does not hold: events of a command
    // with no stored result, a sequence number that named two events, an event id delivered
    // from two commits (the command ran again after its first commit was lost).
    commandsWithEventsButNoStoredResult: [eventsWithoutResult, eventsWithoutResult === 0],
    sequenceNumbersReused: [reusedSequences, reusedSequences === 0],
    eventsOfLostCommitsDelivered: [eventsFromTwoCommits, eventsFromTwoCommits === 0],
    // A reply is sent once, after the acknowledgement: one a dying broker node took (or a
    // quorum queue electing a leader refused), or a conductor killed between its ack and its
    // replies, is not sent again; the stored result answers GET /commands/:id instead. Only
    // a datastore fault, which kills neither, must leave every command replied.
    ...(faultList(o.flags["--fault"]).every((kind) =>
      (datastoreFaultKinds as readonly string[]).includes(kind),
    )
      ? { commandsNeverReplied: [unreplied, unreplied === 0] as const }
      : {}),
    repliesUnlikeTheirStoredResult: [repliesUnlikeStored, repliesUnlikeStored === 0],
    distinctEventsReceived: [`${distinct} of ${expectedEvents}`, distinct === expectedEvents],
    phantomEvents: [o.phantomEvents, o.phantomEvents === 0],
    unexpectedEvents: [o.unexpectedEvents, o.unexpectedEvents === 0],
    // One partition, one queue, its order restored by sequence number as the contract tells
    // consumers to: an offset behind one already delivered is a reordering, unless that
    // event came before (a redelivery, or a publish again after a lost confirm).
    eventsOutOfStreamOrder: [o.streamOrder.outOfOrder, o.streamOrder.outOfOrder === 0],
    eventsWithoutStreamOffset: [o.streamOrder.withoutOffset, o.streamOrder.withoutOffset === 0],
    eventsWithoutSequence: [o.streamOrder.withoutSequence, o.streamOrder.withoutSequence === 0],
    eventsHeldBehindAGapAtEnd: [o.streamOrder.heldAtEnd, o.streamOrder.heldAtEnd === 0],
    finalBookDigest: [
      o.finalDigest.digest ?? "unavailable",
      o.finalDigest.digest === o.expected.digest,
    ],
    restingOrdersAtEnd: [
      `${o.finalDigest.restingOrders ?? -1} (replay ${o.expected.restingOrders})`,
      o.finalDigest.restingOrders === o.expected.restingOrders,
    ],
    everyKillRecovered: [
      `${acked.filter(Number.isFinite).length} of ${rows.length}`,
      acked.every(Number.isFinite),
    ],
    everyKillSettledWithTheVictimRejoined: [
      `${rows.filter((r) => r.rejoinedAfterMs !== undefined).length} of ${rows.length}`,
      rows.every((r) => r.rejoinedAfterMs !== undefined),
    ],
  } as const;
  const invariants: BenchReport["invariants"] = { ok: true };
  for (const [name, [value, ok]] of Object.entries(checks)) {
    invariants[name] = value;
    invariants[`${name}Ok`] = ok;
    if (!ok) invariants.ok = false;
  }
  return invariants;
}

/** A reply is the stored result itself; compared parsed, so key order cannot differ. */
/** The same fields and values, in any order: a stored result is rebuilt from its stored form. */
function sameResult(reply: string, stored: string): boolean {
  const canonical = (json: string) => {
    const parsed = JSON.parse(json) as Record<string, unknown>;
    // A result is flat: the key list as replacer orders its keys.
    return JSON.stringify(parsed, Object.keys(parsed).sort());
  };
  try {
    return canonical(reply) === canonical(stored);
  } catch {
    return reply === stored;
  }
}

function eventsOf(stored: string): number {
  try {
    return Number((JSON.parse(stored) as { events?: number }).events ?? 0);
  } catch {
    return 0;
  }
}

export function failoverReport(
  o: FailoverObservation,
  environment: Record<string, string | number>,
): BenchReport & { faults: FaultRow[] } {
  const rows = faultRows(o);
  const overall = new LatencyHistogram();
  for (let i = 0; i < o.sent.length; i++)
    if (o.repliedMs[i]! > 0) overall.record((o.repliedMs[i]! - o.scheduledMs[i]!) * 1e6);
  const acked = rows.map((r) => r.ackedAgainMs ?? Number.POSITIVE_INFINITY);
  const events = rows.map((r) => r.eventsAgainMs ?? Number.POSITIVE_INFINITY);
  const silences = rows.map((r) => r.longestSilenceMs ?? Number.POSITIVE_INFINITY);
  const arrivals = rows.map((r) => r.eventsArriveAgainMs ?? Number.POSITIVE_INFINITY);
  const ackedAfter = rows.map((r) => r.ackedAfterPromotionMs ?? Number.POSITIVE_INFINITY);
  const eventsAfter = rows.map((r) => r.eventsAfterPromotionMs ?? Number.POSITIVE_INFINITY);
  const metric = (m: Record<string, unknown>, key: string) =>
    typeof m[key] === "number" ? (m[key] as number) : -1;
  const flags = o.flags;
  return {
    boundary: "failover",
    boundaryStatement: `full pipeline (RPC replies and the outbox's events) at ${flags["--rate"]} commands/s offered, open loop, on the HA stack (a Valkey primary, two replicas, three Sentinels); ${faultStatement(flags)}, ${flags["--faults"]} times, ${flags["--fault-interval"]} s apart; latency from each command's scheduled send to its durable reply`,
    durability:
      "aof-replicated (each acknowledged batch fsynced by every replica Sentinel could promote)",
    workload: flags["--workload"],
    commands: o.sent.length,
    warmup: 0,
    seconds: o.seconds,
    commandsPerSecond: achievedRate(o),
    latencyMs: overall.percentilesMs(),
    invariants: failoverInvariants(o),
    environment,
    extra: {
      "acknowledged again after a kill, median ms": Math.round(median(acked)),
      "acknowledged again after a kill, max ms": Math.round(Math.max(...acked)),
      "longest without a reply around a fault, median ms": Math.round(median(silences)),
      "longest without a reply around a fault, max ms": Math.round(Math.max(...silences)),
      "events flow again after a kill, median ms": Math.round(median(events)),
      "events flow again after a kill, max ms": Math.round(Math.max(...events)),
      "events arrive again after a kill (before the order is restored), median ms": Math.round(
        median(arrivals),
      ),
      "events arrive again after a kill (before the order is restored), max ms": Math.round(
        Math.max(...arrivals),
      ),
      "acknowledged again after the promotion, median ms": Math.round(median(ackedAfter)),
      "acknowledged again after the promotion, max ms": Math.round(Math.max(...ackedAfter)),
      "events again after the promotion, median ms": Math.round(median(eventsAfter)),
      "events again after the promotion, max ms": Math.round(Math.max(...eventsAfter)),
      "target after the promotion: median <= ms, max <= ms": `${afterPromotionTargets.medianMs}, ${afterPromotionTargets.maxMs}`,
      "target after the promotion met": afterPromotionMet([ackedAfter, eventsAfter]),
      "longest a sequence gap stayed open, ms": Math.round(o.streamOrder.longestGapMs),
      "took over after a kill (promotion or standby), median ms": Math.round(
        median(rows.map((r) => r.promotedAfterMs)),
      ),
      "target: acknowledged again, median <= ms": failoverTargets.medianAckedAgainMs,
      "target met":
        median(acked) <= failoverTargets.medianAckedAgainMs &&
        Math.max(...acked) < failoverTargets.maxAckedAgainMs,
      "event copies beyond the first (same payload)": o.eventCopies - o.phantomEvents,
      "events that arrived before an earlier one (held until it came)": o.streamOrder.arrivedEarly,
      "replies never received (results stored; GET /commands/:id answers)": o.repliedMs.filter(
        (t) => t === 0,
      ).length,
      "fewest online replicas after a rejoin": o.minReplicas,
      "kills after which Sentinel switched twice": rows.filter(switchedAgain).length,
      "conductor datastore failovers seen": metric(
        o.conductorMetrics,
        "matching_datastore_failovers_total",
      ),
      "conductor durability timeouts": metric(
        o.conductorMetrics,
        "matching_durability_timeouts_total",
      ),
      "conductor failed batches' commands": metric(
        o.conductorMetrics,
        "matching_command_failures_total",
      ),
      "outbox durability timeouts": metric(
        o.outboxMetrics,
        "matching_outbox_durability_timeouts_total",
      ),
      "outbox datastore failovers seen": metric(
        o.outboxMetrics,
        "matching_datastore_failovers_total",
      ),
      ...Object.fromEntries(
        rows.map((r, k) => [
          `kill ${k + 1}`,
          `${r.killed} -> ${r.promoted}${switchedAgain(r) ? ` -> ${r.settledOn} (Sentinel switched again)` : ""}: promoted ${r.promotedAfterMs.toFixed(0)} ms, acked again ${fmtMs(r.ackedAgainMs)} (${fmtMs(r.ackedAfterPromotionMs)} after the promotion), longest without a reply ${fmtMs(r.longestSilenceMs)}, events again ${fmtMs(r.eventsAgainMs)} (${fmtMs(r.eventsAfterPromotionMs)} after the promotion), p99 before/around/after ${r.p99BeforeMs.toFixed(1)}/${r.p99AroundMs.toFixed(1)}/${r.p99AfterMs.toFixed(1)} ms`,
        ]),
      ),
    },
    faults: rows,
  };
}

function faultStatement(flags: FailoverObservation["flags"]): string {
  const kinds = faultList(flags["--fault"]);
  return kinds.length === 1
    ? oneFaultStatement(kinds[0]!)
    : `in turn: ${kinds.map(oneFaultStatement).join("; ")}`;
}

function oneFaultStatement(kind: string): string {
  switch (kind) {
    case "primary-handover":
      return "a planned failover (SENTINEL FAILOVER) while the primary stays up and connected";
    case "primary-freeze":
      return "the datastore primary is SIGSTOPped until a replica is promoted, then SIGCONTed with its clients connected";
    case "primary-partition":
      return "the datastore primary is cut off from the three Sentinels (replicas and matchd still reach it), healed 5 s after the promotion";
    case "primary-isolate":
      return "the datastore primary is cut off from the Sentinels and its replicas (matchd still reaches it), healed 5 s after the promotion";
    case "replica-kill":
      return "a replica is SIGKILLed and restarted 2 s later";
    case "sentinel-kill":
      return "a Sentinel is SIGKILLed and restarted 2 s later";
    case "replica-standin":
      return "a replica is cut off from the Sentinels only (it still replicates); 3 s later the link between the primary and the other replica is cut, and 1.5 s later the primary is SIGKILLed; healed 2 s after the promotion";
    case "two-faults":
      return "a replica is cut off from the Sentinels only (it still replicates); 3 s later a planned failover (SENTINEL FAILOVER); healed 2 s after the promotion";
    case "conductor":
      return "the active conductor is SIGKILLed while a standby consumes the same queue, and restarted as the next standby";
    case "broker-node":
      return "a RabbitMQ node is SIGKILLed (the command queue's leader on every other kill), and restarted once the queue has a leader elsewhere";
    case "outbox":
      return "the outbox holding the lease is SIGKILLed while a standby waits for it (lease TTL 3 s), and restarted as the next standby";
    default:
      return "the datastore primary is SIGKILLed, and restarted once a replica was promoted";
  }
}

/**
 * Commands whose events arrived, per second from the open loop's start to the last command's
 * first event: the outages are inside the span, the final drain wait is not.
 */
function achievedRate(o: FailoverObservation): number {
  // A loop, not Math.max(...): a run of 30 faults has 700,000 commands, past the call stack.
  let arrived = 0;
  let lastMs = Number.NEGATIVE_INFINITY;
  for (const t of o.firstEventMs) {
    if (!(t > 0)) continue;
    arrived++;
    if (t > lastMs) lastMs = t;
  }
  return arrived / ((lastMs - o.loadStartMs) / 1000);
}

function fmtMs(ms: number | undefined): string {
  return ms === undefined ? "never" : `${ms.toFixed(0)} ms`;
}
