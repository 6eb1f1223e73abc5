/**
 * Retry pacing for broker and datastore trouble: exponential backoff with jitter,
 * capped at 30 s, so a long outage is retried forever without hammering a server
 * that is restarting, and many outboxes do not retry in lockstep.
 */

export const backoffCapMs = 30_000;

/** Delay before retry number `attempt` (0-based): 100 ms doubling, jittered to 50..100 %, capped. */
export function backoffDelayMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(backoffCapMs, 100 * 2 ** Math.min(attempt, 20));
  return Math.round(ceiling * (0.5 + 0.5 * random()));
}
