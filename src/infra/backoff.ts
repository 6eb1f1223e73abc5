/**
 * Retry pacing for broker and datastore trouble: exponential backoff with jitter and a
 * cap, so a long outage is retried forever without hammering a server that is
 * restarting, and many processes do not retry in lockstep.
 */

export const backoffCapMs = 30_000;

export interface BackoffShape {
  /** Ceiling of the first delay. */
  baseMs?: number;
  /** No delay exceeds this. */
  capMs?: number;
}

/** Delay before retry number `attempt` (0-based): base doubling, jittered to 50..100 %, capped. */
export function backoffDelayMs(
  attempt: number,
  { baseMs = 100, capMs = backoffCapMs }: BackoffShape = {},
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 20));
  return Math.round(ceiling * (0.5 + 0.5 * random()));
}
