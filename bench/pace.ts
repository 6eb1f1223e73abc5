/**
 * Waiting for an open-loop send's scheduled time without spinning. Bun.sleep below one
 * millisecond returns at once, so a pacing loop that asks it for the fraction left spins
 * (300,000 wake-ups a second, most of a core) and takes that core from the system it
 * measures. Latency still counts from the scheduled time, so a send up to a timer tick late
 * is charged to the run, never hidden.
 */

/** Resolves at or after `dueMs` (the performance.now() clock), sleeping at least 1 ms. */
export async function sleepUntil(dueMs: number): Promise<void> {
  // A timer may fire a fraction early: it sleeps again (a whole tick) until the time is due.
  for (let wait = dueMs - performance.now(); wait > 0; wait = dueMs - performance.now())
    await Bun.sleep(Math.max(1, wait));
}
