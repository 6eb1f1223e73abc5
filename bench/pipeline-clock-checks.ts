/**
 * The invariants of a wall-clock pipeline run (`--clock wall`), from its replay: the counts
 * cover the whole run, prefill and warm-up included, since a tick's batch may fall on either
 * side of the timed window's edges.
 */
import { TICK_EVERY_MS } from "../src/conductor/clock";
import type { Valkey } from "../src/infra/valkey/client";
import { sleepUntil } from "./pace";
import type { PipelineCommands } from "./pipeline-commands";
import type { PipelineCompletions } from "./pipeline-completions";
import { type ClockedReplay, replayClockedRun } from "./pipeline-replay";
import { LONGEST_DEADLINE_MS } from "./workload-exchange";

/** A service counter's growth since before the prefill. */
export interface WholeRunCounts {
  conductor: (key: string) => number;
  outbox: (key: string) => number;
}

/**
 * After the last command, the conductor still expires orders and fires switches for up to
 * LONGEST_DEADLINE_MS: the run is checked once every deadline it armed has passed and the
 * sink holds every event the conductor created since before the prefill.
 */
export async function settleDeadlines(
  { commands, done }: { commands: PipelineCommands; done: PipelineCompletions },
  createdSinceStart: () => Promise<number>,
  waitFor: (what: string, ready: () => Promise<boolean>, limitMs: number) => Promise<void>,
): Promise<void> {
  const clock = commands.clock;
  if (clock === undefined) return;
  const lastCommand = commands.bodies.length - commands.prefillCount - 1;
  const lastSendMs = clock.epochMs + lastCommand * clock.msPerCommand + clock.shiftMs;
  const allPassedMs = lastSendMs + LONGEST_DEADLINE_MS + 2 * TICK_EVERY_MS;
  await sleepUntil(performance.now() + Math.max(0, allPassedMs - Date.now()));
  const received = () => done.eventsReceived + done.tickEvents;
  await waitFor(
    "the deadlines' events",
    async () => (await createdSinceStart()) === received(),
    60_000,
  );
}

type Check = (name: string, value: number | string | boolean, ok: boolean) => void;

/** Replays the run and checks it; the caller compares the returned digest with the conductor's. */
export async function checkReplay(
  run: { valkey: Valkey; commands: PipelineCommands; done: PipelineCompletions; partition: number },
  wholeRun: WholeRunCounts,
  check: Check,
  evidence: Record<string, number | string | boolean>,
): Promise<ClockedReplay> {
  const { commands, done } = run;
  const replay = await replayClockedRun(run.valkey, run.partition, commands, done);
  check("untimedResults", replay.untimedResults, replay.untimedResults === 0);
  const created = wholeRun.conductor("matching_events_created_total");
  check("eventsCreated", created, created === replay.events);
  evidence.eventsExpected = replay.events;
  check("rejectedResults", done.failedReplies, done.failedReplies === replay.rejected);
  evidence.rejectedExpected = replay.rejected;
  const received = done.eventsReceived + done.tickEvents;
  check("eventsReceivedBySinks", received, received === created);
  const published = wholeRun.outbox("matching_outbox_events_published_total");
  check("eventsPublished", published, published === created);
  // The sink saw the replay's events, in the replay's order, ids and all.
  check("eventOrderDiffersAt", replay.firstDifference, replay.firstDifference === -1);
  const { expired, switched, notInFirstBatch } = replay.deadlines;
  // A run with no expiry or no switch tested nothing of them: that fails too.
  check(
    "deadlinesNotInFirstBatch",
    notInFirstBatch,
    notInFirstBatch === 0 && expired > 0 && switched > 0,
  );
  evidence.ordersExpired = expired;
  evidence.switchesFired = switched;
  evidence.batchTimesKnown = replay.batchTimes;
  return replay;
}
