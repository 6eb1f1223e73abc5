// Good-till-date orders and the engine's clock: time enters only through clock.tick, an
// order rests until the first tick at or past its expireAt, and every path keeps its deadline.

import { describe, expect, test } from "bun:test";
import { MAX_EXPIRIES, MAX_EXPIRY_AHEAD_MS, MatchingEngine } from "../../src/domain/index";
import { amend, cancel, place, tick } from "./helpers";

const T0 = 1_800_000_000_000;

function engineAt(now = T0): MatchingEngine {
  const engine = new MatchingEngine();
  expect(engine.apply(tick(now)).result.code).toBe(0);
  return engine;
}

const gtd = (id: string, expireAt: number, extra: object = {}) =>
  place({ id, timeInForce: "gtd", expireAt, ...extra });

describe("good-till-date", () => {
  test("rests until the first tick at its expireAt, then expires with order.expired.v1", () => {
    const engine = engineAt();
    const placed = engine.apply(gtd("g1", T0 + 1000));
    expect(placed.result.codeName).toBe("rested");
    expect(placed.events[0]!.payload.expireAt).toBe(T0 + 1000);
    expect(engine.apply(tick(T0 + 999)).events).toHaveLength(0);
    const expired = engine.apply(tick(T0 + 1000));
    expect(expired.result.expiredOrders).toBe(1);
    expect(expired.events.map((e) => e.type)).toEqual(["order.expired.v1"]);
    expect(expired.events[0]!.pairId).toBe(1);
    expect(expired.changes).toEqual([
      { op: "remove", order: expect.objectContaining({ id: "g1" }) },
    ]);
    expect(engine.restingOrderCount()).toBe(0);
    engine.check();
    expect(engine.apply(cancel("g1")).result.codeName).toBe("order-already-finished");
  });

  test("refuses an expireAt not after the engine's time or more than 90 days ahead", () => {
    const engine = engineAt();
    expect(engine.apply(gtd("p", T0)).result.codeName).toBe("expiry-in-past");
    expect(engine.apply(gtd("f", T0 + MAX_EXPIRY_AHEAD_MS + 1)).result.codeName).toBe(
      "expiry-too-far",
    );
    expect(engine.apply(gtd("ok", T0 + MAX_EXPIRY_AHEAD_MS)).result.codeName).toBe("rested");
  });

  test("gtd and expireAt go together, and never on a market order", () => {
    const engine = engineAt();
    const codes = [
      place({ id: "a", timeInForce: "gtd" }),
      place({ id: "b", expireAt: T0 + 10 }),
      place({ id: "c", type: "market", price: "0", timeInForce: "gtd", expireAt: T0 + 10 }),
    ].map((c) => engine.apply(c).result.codeName);
    expect(codes).toEqual([
      "unsupported-combination",
      "unsupported-combination",
      "unsupported-combination",
    ]);
  });

  test("a partial fill and an amend keep the deadline", () => {
    const engine = engineAt();
    engine.apply(gtd("g", T0 + 500, { volume: "3", side: "ask" }));
    engine.apply(place({ id: "t", side: "bid", volume: "1", userId: "u2", timeInForce: "ioc" }));
    expect(engine.getOrder("g")!.expireAt).toBe(T0 + 500);
    expect(engine.apply(amend("g", { price: "101" })).result.code).toBe(0);
    expect(engine.getOrder("g")!.expireAt).toBe(T0 + 500);
    engine.check();
    const expired = engine.apply(tick(T0 + 600));
    expect(expired.events[0]!.payload).toMatchObject({
      orderId: "g",
      volume: "2",
      executedVolume: "1",
    });
    engine.check();
  });

  test("a triggered stop-limit rests with its deadline; an untriggered stop expires", () => {
    const engine = engineAt();
    const stop = {
      type: "stop-limit" as const,
      stopPrice: "100",
      price: "105",
      side: "bid" as const,
    };
    engine.apply(gtd("s1", T0 + 100, { ...stop, volume: "2" }));
    engine.apply(gtd("s2", T0 + 100, { ...stop, stopPrice: "200" }));
    engine.apply(place({ id: "m", side: "ask", price: "100", userId: "u2" }));
    engine.apply(place({ id: "x", side: "bid", price: "100", userId: "u3" }));
    expect(engine.getOrder("s1")?.expireAt).toBe(T0 + 100);
    engine.check();
    const expired = engine.apply(tick(T0 + 100));
    // s1 took a new sequence when it rested, after s2's: s2 goes first.
    expect(expired.events.map((e) => e.payload.orderId)).toEqual(["s2", "s1"]);
    expect(expired.events[0]!.payload.stopPrice).toBe("200");
    expect(engine.stopOrderCount()).toBe(0);
  });

  test("expires earliest deadline first, ties in time priority, across pairs", () => {
    const engine = engineAt();
    engine.apply(gtd("late", T0 + 20));
    engine.apply(gtd("b", T0 + 10, { pairId: 2 }));
    engine.apply(gtd("a", T0 + 10, { pairId: 3 }));
    const expired = engine.apply(tick(T0 + 30));
    expect(expired.events.map((e) => [e.payload.orderId, e.pairId])).toEqual([
      ["b", 2],
      ["a", 3],
      ["late", 1],
    ]);
  });

  test(`one tick expires at most ${MAX_EXPIRIES}; the next tick takes the rest`, () => {
    const engine = engineAt();
    for (let i = 0; i < MAX_EXPIRIES + 5; i++) {
      engine.apply(gtd(`o${i}`, T0 + 1, { price: String(100 + (i % 7)) }));
    }
    expect(engine.apply(tick(T0 + 1)).result.expiredOrders).toBe(MAX_EXPIRIES);
    expect(engine.nextExpiry()).toBe(T0 + 1);
    expect(engine.apply(tick(T0 + 2)).result.expiredOrders).toBe(5);
    expect(engine.nextExpiry()).toBeUndefined();
    engine.check();
  });

  test("time never goes back, and a reload arms the same deadlines", () => {
    const engine = engineAt();
    engine.apply(gtd("g", T0 + 50));
    engine.apply(tick(T0 - 1000));
    expect(engine.now()).toBe(T0);
    const reloaded = new MatchingEngine();
    for (const order of engine.restingOrders()) reloaded.loadRestingOrder(order);
    reloaded.loadClock(engine.now());
    expect(reloaded.digest()).toBe(engine.digest());
    expect(reloaded.nextExpiry()).toBe(T0 + 50);
    expect(reloaded.apply(tick(T0 + 50)).events[0]!.type).toBe("order.expired.v1");
  });

  test("filled and cancelled orders leave no deadline behind", () => {
    const engine = engineAt();
    engine.apply(gtd("g1", T0 + 5, { side: "ask" }));
    engine.apply(gtd("g2", T0 + 6));
    engine.apply(place({ id: "t", side: "bid", userId: "u2" }));
    engine.apply(cancel("g2"));
    expect(engine.nextExpiry()).toBeUndefined();
    expect(engine.apply(tick(T0 + 10)).events).toHaveLength(0);
  });
});
