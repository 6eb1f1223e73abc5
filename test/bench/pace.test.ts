// The open-loop pacer waits until a send's scheduled time, also when less than a millisecond
// is left (Bun.sleep below 1 ms returns at once, which made the pacing loops spin).

import { expect, test } from "bun:test";
import { sleepUntil } from "../../bench/pace";

test("sleepUntil resolves at or after the due time, however little is left", async () => {
  for (const aheadMs of [0.05, 0.3, 0.9, 1.5, 3]) {
    const due = performance.now() + aheadMs;
    await sleepUntil(due);
    expect(performance.now()).toBeGreaterThanOrEqual(due);
  }
});

test("a sub-millisecond wait yields to a timer, not a spin of immediate wake-ups", async () => {
  // Bun.sleep(0.3) resolves without waiting: a loop of them turns hundreds of times a
  // millisecond. sleepUntil sleeps whole timer ticks, so 20 waits take 20 ticks or more.
  const started = performance.now();
  for (let i = 0; i < 20; i++) await sleepUntil(performance.now() + 0.3);
  expect(performance.now() - started).toBeGreaterThanOrEqual(19);
});
