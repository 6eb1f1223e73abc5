// The delivery loop's wake-up primitive: a wait ends on wake() or on its timeout, and a
// timed-out wait leaves nothing behind (a standby that is never woken waits once a second).

import { expect, test } from "bun:test";
import { Wakeup } from "../../src/outbox/signal";

test("timed-out waits leave the list; a wake ends every pending wait", async () => {
  const wakeup = new Wakeup();
  for (let i = 0; i < 50; i++) await wakeup.wait(1);
  expect(wakeup.waiting).toBe(0);
  let woken = 0;
  const waits = [wakeup.wait(), wakeup.wait(60_000)].map((w) => w.then(() => woken++));
  expect(wakeup.waiting).toBe(2);
  wakeup.wake();
  await Promise.all(waits);
  expect(woken).toBe(2);
  expect(wakeup.waiting).toBe(0);
});
