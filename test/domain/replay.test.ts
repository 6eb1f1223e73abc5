// Replay determinism: the same workload twice gives a byte-identical event transcript and digest,
// and reloading the resting orders into a fresh engine reproduces the digest.

import { expect, test } from "bun:test";
import { createWorkload, workloadNames } from "../../src/bench/workloads";
import { MatchingEngine } from "../../src/domain/index";

function run(name: string, commands: number): { transcript: string; engine: MatchingEngine } {
  const engine = new MatchingEngine();
  const workload = createWorkload(name, { seed: 7 });
  const parts: string[] = [];
  for (const command of workload.prefill())
    parts.push(JSON.stringify(engine.apply(command).events));
  for (let i = 0; i < commands; i++) {
    const outcome = engine.apply(workload.next(i));
    parts.push(JSON.stringify(outcome.result), JSON.stringify(outcome.events));
  }
  engine.check();
  return { transcript: parts.join("\n"), engine };
}

test.each([...workloadNames])(
  "workload %s replays byte-identically and reloads to the same digest",
  (name) => {
    const first = run(name, 3000);
    const second = run(name, 3000);
    expect(second.transcript).toBe(first.transcript);
    expect(second.engine.digest()).toBe(first.engine.digest());
    const reloaded = new MatchingEngine();
    for (const order of first.engine.restingOrders()) reloaded.loadRestingOrder(order);
    reloaded.check();
    expect(reloaded.digest()).toBe(first.engine.digest());
    expect(reloaded.restingOrderCount()).toBe(first.engine.restingOrderCount());
  },
);

test("alternating emits exactly 2 events per command and leaves an empty book", () => {
  const engine = new MatchingEngine();
  const workload = createWorkload("alternating", { seed: 1 });
  let events = 0;
  for (let i = 0; i < 1000; i++) events += engine.apply(workload.next(i)).events.length;
  expect(events).toBe(2000);
  expect(engine.restingOrderCount()).toBe(0);
});
