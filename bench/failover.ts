import { storedResultJson } from "../src/conductor/stored-result";
import type { Config } from "../src/config/schema";
import { type CommandEnvelope, MatchingEngine } from "../src/domain/index";
import { Resequencer } from "../src/feed/resequencer";
import { allEventExchanges, commandExchange, commandQueue } from "../src/infra/amqp/topology";
import { createValkey } from "../src/infra/valkey/client";
import { partitionKeys } from "../src/infra/valkey/keys";
import type { StackInfo } from "../src/stack/index";
import { type FailoverFlags, failoverFlags } from "./boundaries/failover";
import { ClusterClient } from "./cluster-client";
import { CommitEvidence, type CommitEvidenceCounts } from "./commit-evidence";
import { CommandRecords } from "./failover-records";
import type { FaultDriver } from "./fault-drivers";
import { parseBenchFlags } from "./flag-parse";
import { sleepUntil } from "./pace";
import { createWorkload } from "./workloads";

export function parseFailoverFlags(flags: ReadonlyMap<string, string>): FailoverFlags {
  return parseBenchFlags(failoverFlags, flags);
}

/** What one kill did, as the clients saw it. */
export interface FaultRecord {
  killed: string;
  promoted: string;
  /** The primary once the topology settled (Sentinel may switch twice). */
  settledOn: string;
  /** From the kill, milliseconds (performance.now() based, relative to the run's start). */
  atMs: number;
  promotedAfterMs: number;
  /** Until the first durable reply to a command scheduled after the kill. */
  ackedAgainMs: number | undefined;
  /** Until the first event of a command scheduled after the kill. */
  eventsAgainMs: number | undefined;
  /** The same for the first event to arrive, before the order is restored. */
  eventsArriveAgainMs: number | undefined;
  /**
   * From the promotion (the kill when nothing is promoted) until the first reply received
   * after it: the stall a failover costs clients once Sentinel named the new primary.
   */
  ackedAfterPromotionMs: number | undefined;
  /** The same for the first event to reach a consumer, in the restored order. */
  eventsAfterPromotionMs: number | undefined;
  /** Until the restarted node was an online replica again. */
  rejoinedAfterMs: number | undefined;
  /**
   * The longest time without any durable reply from the fault until the set settled: a fault
   * that is not a crash lets the old primary acknowledge until Sentinel acts, so the stall
   * comes later than the fault, and only this shows it.
   */
  longestSilenceMs: number | undefined;
}

export interface StreamOrderSeen {
  /** New events delivered behind an offset already passed, after restoring the order. */
  outOfOrder: number;
  withoutOffset: number;
  withoutSequence: number;
  /** Events that arrived while an earlier one was missing (held until it came). */
  arrivedEarly: number;
  /** Events still held behind a gap when the run ended: the gap never filled. */
  heldAtEnd: number;
  /** The longest a gap stayed open, ms. */
  longestGapMs: number;
}

/** Everything the run observed, judged by failover-report.ts. */
export interface FailoverObservation {
  flags: FailoverFlags;
  sent: CommandEnvelope[];
  /** Scheduled send time of each command, ms from the run's start. */
  scheduledMs: number[];
  /** Reply time of each command, ms from the run's start (0: none). */
  repliedMs: number[];
  replyBodies: (string | undefined)[];
  /** Time of each command's first event, ms from the run's start (0: none). */
  firstEventMs: number[];
  /** Payload hash of every distinct event id seen. */
  eventHashes: Map<string, bigint>;
  eventCopies: number;
  phantomEvents: number;
  unexpectedEvents: number;
  /** What a consumer sees of commits that did not survive (see CommitEvidence). */
  commits: CommitEvidenceCounts;
  /**
   * The partition's stream order as the sink delivered it after restoring the order by
   * `x-partition-sequence` (see Resequencer), and what the restoring did.
   */
  streamOrder: StreamOrderSeen;
  faults: FaultRecord[];
  stored: (string | null)[];
  finalDigest: { digest?: string; restingOrders?: number };
  expected: { digest: string; restingOrders: number };
  conductorMetrics: Record<string, unknown>;
  outboxMetrics: Record<string, unknown>;
  minReplicas: number;
  seconds: number;
  /** When the open loop began, ms from the run's start. */
  loadStartMs: number;
}

export interface FailoverRun {
  info: StackInfo;
  faults: FaultDriver;
  config: Config;
  /** Where the final queries go: the faulted service's current instances change. */
  conductorUrl: () => Promise<string>;
  outboxUrl: () => Promise<string>;
  flags: FailoverFlags;
  progress: (line: string) => void;
}

/** Load before the first kill, and after the last one settled. */
const leadMs = 5000;
const tailMs = 4000;

export async function observeFailovers(run: FailoverRun): Promise<FailoverObservation> {
  const { flags, info, progress } = run;
  const partition = run.config.partition;
  const workload = createWorkload(flags["--workload"], { seed: flags["--seed"], partition });
  const start = performance.now();
  const now = () => performance.now() - start;
  // Commands are made as they are sent: the run lasts as long as its faults take.
  const records = new CommandRecords(now);
  const evidence = new CommitEvidence();
  const keys = partitionKeys(partition);
  const sequenceAtStart = await readValue(info.datastoreUrl, keys.eventSequence);
  const resequencer = new Resequencer(records.delivered, Number(sequenceAtStart ?? 0) + 1);
  const broker = await ClusterClient.open({
    urls: info.brokerUrl,
    runId: `failover-${process.pid}-${Date.now()}`,
    eventExchanges: allEventExchanges,
    onReply: (message) => records.replied(message.correlationId ?? "", message.body.toString()),
    onEvent: (message) => {
      const eventId = message.messageId ?? "";
      evidence.record(eventId, message.sequence, message.offset, message.body);
      records.arrived(eventId);
      resequencer.push(message.sequence, message);
    },
    progress,
  });
  const send = (command: CommandEnvelope, atMs: number) => {
    records.add(command, atMs);
    broker.publish(commandExchange, commandQueue(partition), Buffer.from(JSON.stringify(command)), {
      persistent: true,
      contentType: "application/json",
      replyTo: broker.replyQueue,
      correlationId: command.commandId,
      messageId: command.commandId,
      timestamp: Date.now(),
    });
  };
  for (const command of workload.prefill()) send(command, now());
  const load = openLoop(flags["--rate"], start, now, (k, at) => send(workload.next(k), at));
  const { faults, minReplicas } = await injectFaults(run, start, now);
  await Bun.sleep(tailMs);
  await load.stop();
  progress("waiting for every reply and event");
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline && !records.complete()) await Bun.sleep(100);
  await Bun.sleep(1000); // late duplicates, if any, are counted too
  const seconds = now() / 1000;
  timeRecoveries(faults, records);
  const heldAtEnd = resequencer.waiting;
  resequencer.release();
  const final = await finalState(run, records);
  await broker.close();
  const { sent, scheduledMs, repliedMs, replyBodies, firstEventMs, eventHashes, order } = records;
  return {
    flags,
    sent,
    scheduledMs,
    repliedMs,
    replyBodies,
    firstEventMs,
    eventHashes,
    eventCopies: records.eventCopies,
    phantomEvents: records.phantomEvents,
    unexpectedEvents: records.unexpectedEvents,
    commits: evidence.counts(),
    streamOrder: {
      outOfOrder: order.outOfOrder,
      withoutOffset: order.withoutOffset,
      withoutSequence: resequencer.withoutSequence,
      arrivedEarly: resequencer.arrivedEarly,
      heldAtEnd,
      longestGapMs: resequencer.longestGapMs,
    },
    faults,
    ...final,
    minReplicas: Number.isFinite(minReplicas) ? minReplicas : -1,
    seconds,
    loadStartMs: load.startMs,
  };
}

/** Sends command k at its scheduled time, `rate` a second, until stopped. */
function openLoop(
  rate: number,
  start: number,
  now: () => number,
  sendNext: (k: number, atMs: number) => void,
): { startMs: number; stop: () => Promise<void> } {
  let ends = false;
  const startMs = now();
  const running = (async () => {
    for (let k = 0; !ends; k++) {
      const at = startMs + (k * 1000) / rate;
      // `at` counts from `start`; sleepUntil takes the performance.now() clock.
      await sleepUntil(start + at);
      sendNext(k, at);
    }
  })();
  return {
    startMs,
    stop: async () => {
      ends = true;
      await running;
    },
  };
}

/**
 * The faults, one after another: each once the last one settled, `--fault-interval` after
 * the last one at the earliest (5 s after the load began for the first).
 */
async function injectFaults(
  run: FailoverRun,
  start: number,
  now: () => number,
): Promise<{ faults: FaultRecord[]; minReplicas: number }> {
  const faults: FaultRecord[] = [];
  let minReplicas = Number.POSITIVE_INFINITY;
  let nextAt = leadMs;
  for (let f = 0; f < run.flags["--faults"]; f++) {
    if (nextAt > now()) await Bun.sleep(nextAt - now());
    const outcome = await run.faults.inject();
    const atMs = outcome.killedAt - start;
    if (outcome.replicas >= 0) minReplicas = Math.min(minReplicas, outcome.replicas);
    faults.push({
      killed: outcome.killed,
      promoted: outcome.promoted,
      settledOn: outcome.settledOn,
      atMs,
      promotedAfterMs: outcome.promotedAfterMs,
      ackedAgainMs: undefined,
      eventsAgainMs: undefined,
      eventsArriveAgainMs: undefined,
      ackedAfterPromotionMs: undefined,
      eventsAfterPromotionMs: undefined,
      rejoinedAfterMs: outcome.settled ? now() - atMs : undefined,
      longestSilenceMs: undefined,
    });
    run.progress(
      `fault ${f + 1} at ${(atMs / 1000).toFixed(1)} s: killed ${outcome.killed}; ${outcome.promoted} took over after ${outcome.promotedAfterMs.toFixed(0)} ms; ${outcome.settled ? `settled on ${outcome.settledOn}, the victim back` : "not settled"}`,
    );
    nextAt = Math.max(atMs + run.flags["--fault-interval"] * 1000, now() + 2000);
  }
  return { faults, minReplicas };
}

/** Each fault's recovery figures, from what every command saw. */
function timeRecoveries(faults: FaultRecord[], records: CommandRecords): void {
  const { scheduledMs, repliedMs, firstEventMs, firstArrivalMs } = records;
  const replyTimes = Float64Array.from(repliedMs.filter((t) => t > 0)).sort();
  for (const fault of faults) {
    const settledAt = fault.atMs + (fault.rejoinedAfterMs ?? 10_000);
    fault.longestSilenceMs = longestSilence(replyTimes, fault.atMs, settledAt);
    fault.ackedAgainMs = firstAfter(scheduledMs, repliedMs, fault.atMs);
    fault.eventsAgainMs = firstAfter(scheduledMs, firstEventMs, fault.atMs);
    fault.eventsArriveAgainMs = firstAfter(scheduledMs, firstArrivalMs, fault.atMs);
    const promotedAt = fault.atMs + fault.promotedAfterMs;
    fault.ackedAfterPromotionMs = firstReceivedAfter(repliedMs, promotedAt);
    fault.eventsAfterPromotionMs = firstReceivedAfter(firstEventMs, promotedAt);
  }
}

/**
 * What the final primary holds (every command's stored result), the books the services end
 * with against the pure engine's replay in commit order, and both services' metrics.
 */
async function finalState(run: FailoverRun, records: CommandRecords) {
  const { sent, committedAt } = records;
  const keys = partitionKeys(run.config.partition);
  const valkey = createValkey(run.info.datastoreUrl, { name: "matchd-bench-failover-check" });
  const stored: (string | null)[] = [];
  for (let i = 0; i < sent.length; i += 1000) {
    const chunk = sent.slice(i, i + 1000).map((c) => keys.processedCommand(c.commandId));
    const values = await valkey.mget(chunk);
    stored.push(
      ...values.map((v, j) => (v === null ? null : storedResultJson(sent[i + j]!.commandId, v))),
    );
  }
  valkey.disconnect();
  // The stored order: a command nacked while a queue elected a leader went in again after
  // later ones, and the conductor applied them as they came.
  const reference = new MatchingEngine();
  for (const i of commitOrder(committedAt, sent.length)) reference.apply(sent[i]!);
  const finalDigest = (await fetch(`${await run.conductorUrl()}/digest`).then((r) => r.json())) as {
    digest?: string;
    restingOrders?: number;
  };
  const [conductorMetrics = {}, outboxMetrics = {}] = await Promise.all(
    [await run.conductorUrl(), await run.outboxUrl()].map(
      async (url) => (await (await fetch(`${url}/metrics`)).json()) as Record<string, unknown>,
    ),
  );
  const expected = { digest: reference.digest(), restingOrders: reference.restingOrderCount() };
  return { stored, finalDigest, expected, conductorMetrics, outboxMetrics };
}

/** Command indices in commit order; commands with no event seen keep their send order, last. */
function commitOrder(committedAt: readonly (bigint | undefined)[], count: number): number[] {
  const indices = Array.from({ length: count }, (_, i) => i);
  const seen = indices.filter((i) => committedAt[i] !== undefined);
  seen.sort((a, b) =>
    committedAt[a]! < committedAt[b]! ? -1 : committedAt[a]! > committedAt[b]! ? 1 : a - b,
  );
  return [...seen, ...indices.filter((i) => committedAt[i] === undefined)];
}

/** Milliseconds from `atMs` to the earliest `done` of a command scheduled after it. */
function firstAfter(scheduled: number[], done: number[], atMs: number): number | undefined {
  let first = Number.POSITIVE_INFINITY;
  for (let i = 0; i < scheduled.length; i++) {
    if (scheduled[i]! >= atMs && done[i]! > 0 && done[i]! < first) first = done[i]!;
  }
  return Number.isFinite(first) ? first - atMs : undefined;
}

/**
 * From `fromMs` until the first reply (or event) received after it, of any command: every
 * promotion comes after a stall (the watch holds acknowledgements from the moment Sentinel
 * acts), so this is when service resumed, whatever backlog the stall left.
 */
function firstReceivedAfter(done: number[], fromMs: number): number | undefined {
  let first = Number.POSITIVE_INFINITY;
  for (const t of done) if (t >= fromMs && t < first) first = t;
  return Number.isFinite(first) ? first - fromMs : undefined;
}

/**
 * The longest gap between replies (sorted receive times) that overlaps [fromMs, toMs]: from
 * the last reply before fromMs to the first one after toMs at the widest.
 */
function longestSilence(replies: Float64Array, fromMs: number, toMs: number): number {
  let previous = fromMs;
  let longest = 0;
  for (const t of replies) {
    if (t <= fromMs) {
      previous = t;
      continue;
    }
    longest = Math.max(longest, t - previous);
    previous = t;
    if (t > toMs) break;
  }
  return longest;
}

/** One key's value, read on a connection of its own. */
async function readValue(url: string, key: string): Promise<string | null> {
  const valkey = createValkey(url, { name: "matchd-bench-failover-sequence" });
  try {
    return await valkey.get(key);
  } finally {
    valkey.disconnect();
  }
}
