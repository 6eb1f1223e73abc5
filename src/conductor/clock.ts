/**
 * Time for the engine: the conductor decides "now" once per batch and hands it over as a
 * clock.tick, the only way time enters the domain; and, while no command arrives, it commits
 * a batch of its own when an armed good-till-date order is due, at most every TICK_EVERY_MS.
 */

import type { ClockTickCommand, MatchingEngine } from "../domain/index";

/** The shortest gap between two batches the conductor commits only to tick. */
export const TICK_EVERY_MS = 100;

/**
 * The batch's clock.tick, or undefined when the wall clock is not past the engine's time
 * (it stepped back, or the same millisecond): time never goes back, and each tick's id,
 * made of its time, is new.
 */
export function tickFor(
  engine: MatchingEngine,
  partition: number,
  wallMs: number,
): ClockTickCommand | undefined {
  if (!(wallMs > engine.now())) return undefined;
  return {
    schemaVersion: 1,
    commandId: `clock.tick:${partition}:${wallMs}`,
    correlationId: "",
    type: "clock.tick",
    submittedAt: new Date(wallMs).toISOString(),
    pairId: 0,
    partition,
    payload: { now: wallMs },
  };
}

/**
 * How long an idle conductor may sleep before a tick is due: until the earliest armed
 * deadline, but not before TICK_EVERY_MS after its last batch; undefined when none is armed.
 */
export function msUntilTick(
  engine: MatchingEngine,
  wallMs: number,
  lastBatchMs: number,
): number | undefined {
  const next = engine.nextExpiry();
  if (next === undefined) return undefined;
  // A tick needs a millisecond past the engine's time as well (see tickFor).
  return Math.max(
    0,
    next - wallMs,
    engine.now() + 1 - wallMs,
    lastBatchMs + TICK_EVERY_MS - wallMs,
  );
}
