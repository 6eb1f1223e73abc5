// Replay determinism: the same workload twice gives a byte-identical event transcript and digest,
// and reloading the resting orders into a fresh engine reproduces the digest.

import { expect, test } from "bun:test";
import { createWorkload, workloadNames } from "../../bench/workloads";
import { MatchingEngine, type PlaceOrderPayload } from "../../src/domain/index";
import { place } from "./helpers";

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
    for (const stop of first.engine.stopOrders()) reloaded.loadStopOrder(stop);
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

test("the digest tells books apart that differ only where a field's text could pass for another's", () => {
  const digestOf = (orders: Partial<PlaceOrderPayload>[]): string => {
    const engine = new MatchingEngine();
    for (const [i, order] of orders.entries()) {
      const outcome = engine.apply(place({ id: `o${i}`, timestamp: 1_704_067_200_000, ...order }));
      expect(outcome.result.status).toBe("accepted");
    }
    return engine.digest();
  };
  // The old separator byte (0x1f) inside an id against the same byte between id and user id.
  expect(digestOf([{ id: "x\u001fu1", userId: "y" }])).not.toBe(
    digestOf([{ id: "x", userId: "u1\u001fy" }]),
  );
  // A character above 0xff against the three bytes the old encoding gave it.
  expect(digestOf([{ id: "\u4142" }])).not.toBe(digestOf([{ id: "\u00ffAB" }]));
  // Same orders, other precisions: the next order is judged against them.
  expect(digestOf([{ id: "p", priceDecimals: 2 }])).not.toBe(
    digestOf([{ id: "p", priceDecimals: 3 }]),
  );
  // Same book, same digest.
  expect(digestOf([{ id: "p" }])).toBe(digestOf([{ id: "p" }]));
});
