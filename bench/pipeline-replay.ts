/**
 * A wall-clock pipeline run checked after it ends. What the conductor did depended on when
 * each batch ran, so nothing was predicted: the run is replayed through the pure engine with
 * the times the conductor recorded (each stored result's `transactTime`, and the ticks whose
 * events reached the sink), and must give the very events the sink received, in order, and
 * the conductor's book digest. Each expiry and switch is also checked against those times:
 * it happened in the first batch whose time reached its deadline.
 */
import { tickFor } from "../src/conductor/clock";
import { decodeStoredResult } from "../src/conductor/stored-result";
import { type CommandEnvelope, MatchingEngine } from "../src/domain/index";
import type { EventEnvelope } from "../src/domain/types";
import type { Valkey } from "../src/infra/valkey/client";
import { partitionKeys } from "../src/infra/valkey/keys";

export interface ClockedReplay {
  /** Commands whose stored result has no time (or none at all): the replay cannot place them. */
  untimedResults: number;
  /** Distinct batch times known: the commands' and the ticks' seen at the sink. */
  batchTimes: number;
  events: number;
  /** The commands' order.rejected.v1 events. */
  rejected: number;
  /** Index of the first event id where the sink and the replay differ; -1: none. */
  firstDifference: number;
  digest: string;
  /** Expiries and switches, and those not in the first batch at or past their deadline. */
  deadlines: { expired: number; switched: number; notInFirstBatch: number };
}

/** Replays `bodies` with the conductor's recorded times against what the sink received. */
export async function replayClockedRun(
  valkey: Valkey,
  partition: number,
  run: { bodies: readonly Buffer[]; commandIds: readonly string[] },
  sink: { eventIds: readonly string[]; tickTimes: ReadonlySet<number> },
): Promise<ClockedReplay> {
  const times = await transactTimes(valkey, partition, run.commandIds);
  const untimedResults = times.filter((t) => t === undefined).length;
  const batchTimes = [...new Set([...sink.tickTimes, ...times.filter((t) => t !== undefined)])];
  batchTimes.sort((a, b) => a - b);
  const engine = new MatchingEngine();
  const events: EventEnvelope[] = [];
  let rejected = 0;
  let next = 0;
  const tickUpTo = (ms: number) => {
    while (next < batchTimes.length && batchTimes[next]! <= ms) {
      const tick = tickFor(engine, partition, batchTimes[next++]!);
      if (tick !== undefined) events.push(...engine.apply(tick).events);
    }
  };
  run.bodies.forEach((body, i) => {
    // A command with no recorded time (a failed run) goes at the time reached so far.
    tickUpTo(times[i] ?? engine.now());
    const outcome = engine.apply(JSON.parse(body.toString()) as CommandEnvelope);
    for (const event of outcome.events) {
      // What the sink counts: the order.rejected.v1 events of commands.
      if (event.type === "order.rejected.v1") rejected++;
      events.push(event);
    }
  });
  tickUpTo(Number.POSITIVE_INFINITY);
  return {
    untimedResults,
    batchTimes: batchTimes.length,
    events: events.length,
    rejected,
    firstDifference: firstDifference(
      events.map((event) => event.eventId),
      sink.eventIds,
    ),
    digest: engine.digest(),
    deadlines: deadlinesMet(events, batchTimes),
  };
}

/** Every command's stored `transactTime`, read back in slices. */
async function transactTimes(
  valkey: Valkey,
  partition: number,
  commandIds: readonly string[],
): Promise<(number | undefined)[]> {
  const keys = partitionKeys(partition);
  const times: (number | undefined)[] = [];
  const slice = 1000;
  for (let from = 0; from < commandIds.length; from += slice) {
    const ids = commandIds.slice(from, from + slice);
    const values = await valkey.mget(...ids.map((id) => keys.processedCommand(id)));
    values.forEach((value, k) => {
      times.push(value == null ? undefined : decodeStoredResult(ids[k]!, value).transactTime);
    });
  }
  return times;
}

function firstDifference(expected: readonly string[], received: readonly string[]): number {
  const length = Math.max(expected.length, received.length);
  for (let i = 0; i < length; i++) if (expected[i] !== received[i]) return i;
  return -1;
}

/**
 * Each order.expired.v1 and session.triggered.v1 came from a tick at or past its deadline,
 * and no earlier batch had reached it. Ticks that emitted nothing are not seen here, so an
 * idle tick that missed a deadline would go unnoticed; a batch with a command would not.
 */
export function deadlinesMet(
  events: readonly EventEnvelope[],
  batchTimes: readonly number[],
): ClockedReplay["deadlines"] {
  const counts = { expired: 0, switched: 0, notInFirstBatch: 0 };
  for (const event of events) {
    let deadline: number;
    if (event.type === "order.expired.v1") {
      counts.expired++;
      deadline = event.payload.expireAt as number;
    } else if (event.type === "session.triggered.v1") {
      counts.switched++;
      deadline = event.payload.triggerAt as number;
    } else continue;
    const at = Number(event.commandId.split(":")[2]);
    if (firstAtOrAfter(batchTimes, deadline) !== at) counts.notInFirstBatch++;
  }
  return counts;
}

/** The first of the ascending `times` at or after `ms`, by bisection. */
function firstAtOrAfter(times: readonly number[], ms: number): number | undefined {
  let low = 0;
  let high = times.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (times[mid]! < ms) low = mid + 1;
    else high = mid;
  }
  return times[low];
}
