// Table tests of the orders beyond place and cancel (docs/orders.md): amend, stop orders and
// their cascades, cancel-all and halts, each rule and its edges against the engine alone.

import { describe, expect, test } from "bun:test";
import {
  type CommandEnvelope,
  type CommandOutcome,
  MAX_CANCEL_ALL,
  MAX_STOP_TRIGGERS,
  MatchingEngine,
  ResultCodes,
} from "../../src/domain/index";
import { amend, cancel, cancelAll, pairControl, place } from "./helpers";

function engineWith(...commands: CommandEnvelope[]): MatchingEngine {
  const engine = new MatchingEngine();
  for (const command of commands) {
    const outcome = engine.apply(command);
    expect(outcome.result.status).toBe("accepted");
  }
  return engine;
}

function run(engine: MatchingEngine, command: CommandEnvelope): CommandOutcome {
  const outcome = engine.apply(command);
  engine.check();
  engine.checkDigest();
  return outcome;
}

const types = (outcome: CommandOutcome) => outcome.events.map((e) => e.type);
const ask = (id: string, price: string, volume = "1", userId = "u2") =>
  place({ id, side: "ask", price, volume, userId });
const bid = (id: string, price: string, volume = "1", userId = "u1") =>
  place({ id, side: "bid", price, volume, userId });

describe("order.amend", () => {
  test("to the values the order has: accepted, code 107, no events, nothing changes", () => {
    const engine = engineWith(bid("b1", "100", "2"));
    const digest = engine.digest();
    const outcome = run(engine, amend("b1", { volume: "2", price: "100.00" }));
    expect(outcome.result).toMatchObject({ code: ResultCodes.amendUnchanged, events: 0 });
    expect(outcome.events).toEqual([]);
    expect(outcome.changes).toEqual([]);
    expect(engine.digest()).toBe(digest);
  });

  test("a smaller volume at the same price keeps the order's place in the queue", () => {
    const engine = engineWith(bid("b1", "100", "2"), bid("b2", "100", "1"));
    const outcome = run(engine, amend("b1", { volume: "1.5" }));
    expect(outcome.result.code).toBe(ResultCodes.ok);
    expect(outcome.events[0]!.payload).toMatchObject({ priorityKept: true });
    // b1 still trades first.
    const fill = run(engine, ask("a1", "100", "1.5"));
    expect(fill.events[0]!.payload).toMatchObject({ orderId: "b1", volume: "0" });
  });

  test("a larger volume loses the place: the order goes to the back of its level", () => {
    const engine = engineWith(bid("b1", "100", "1"), bid("b2", "100", "1"));
    const outcome = run(engine, amend("b1", { volume: "3" }));
    expect(outcome.events[0]!.payload).toMatchObject({
      priorityKept: false,
      after: { price: "100", volume: "3", volumeTotal: "3" },
    });
    const fill = run(engine, ask("a1", "100", "1"));
    expect(fill.events[0]!.payload).toMatchObject({ orderId: "b2" });
  });

  test("a partly filled order: below executed is refused, exactly executed finishes it", () => {
    const engine = engineWith(bid("b1", "100", "2"), ask("a1", "100", "0.5"));
    const below = run(engine, amend("b1", { volume: "0.4" }));
    expect(below.result.code).toBe(ResultCodes.amendBelowExecuted);
    const reduced = run(engine, amend("b1", { volume: "1" }));
    expect(reduced.events[0]!.payload).toMatchObject({
      before: { volume: "1.5", volumeTotal: "2" },
      after: { volume: "0.5", volumeTotal: "1" },
      executedVolume: "0.5",
    });
    const finished = run(engine, amend("b1", { volume: "0.5" }));
    expect(types(finished)).toEqual(["order.amended.v1", "order.cancelled.v1"]);
    expect(finished.events[1]!.payload).toMatchObject({ reason: "amend", volume: "0.5" });
    expect(finished.result).toMatchObject({ orderStatus: "filled", remainingVolume: "0" });
    expect(engine.restingOrderCount()).toBe(0);
    expect(run(engine, cancel("b1")).result.code).toBe(ResultCodes.orderAlreadyFinished);
  });

  test("a new price that crosses re-matches the order; its remainder rests again", () => {
    const engine = engineWith(bid("b1", "99", "2"), ask("a1", "100", "1"));
    const outcome = run(engine, amend("b1", { price: "100" }));
    expect(types(outcome)).toEqual([
      "order.amended.v1",
      "order.filled.v1",
      "deal.executed.v1",
      "order.rested.v1",
    ]);
    expect(outcome.result).toMatchObject({
      orderStatus: "partially-filled-rested",
      executedVolume: "1",
      remainingVolume: "1",
    });
    expect(engine.getOrder("b1")).toMatchObject({ price: "100", volume: "1" });
  });

  test("a post-only order whose new price would trade is refused and stays as it was", () => {
    const engine = engineWith(
      place({ id: "b1", price: "99", postOnly: true }),
      ask("a1", "100", "1"),
    );
    const before = engine.getOrder("b1");
    const outcome = run(engine, amend("b1", { price: "100" }));
    expect(outcome.result.code).toBe(ResultCodes.postOnlyWouldTake);
    expect(engine.getOrder("b1")).toEqual(before!);
  });

  test("checks run in the documented order", () => {
    const engine = engineWith(bid("b1", "100"));
    expect(run(engine, amend("b1", {})).result.code).toBe(ResultCodes.badEnvelope);
    expect(run(engine, amend("zz", { volume: "1" })).result.code).toBe(ResultCodes.unknownOrder);
    expect(run(engine, amend("b1", { volume: "1" }, "u9")).result.code).toBe(ResultCodes.notOwner);
    expect(run(engine, amend("b1", { volume: "0" })).result.code).toBe(ResultCodes.nonPositive);
    expect(run(engine, amend("b1", { price: "1.001" })).result.code).toBe(
      ResultCodes.precisionExceeded,
    );
    expect(run(engine, amend("b1", { stopPrice: "90" })).result.code).toBe(
      ResultCodes.unsupportedCombination,
    );
  });
});

describe("stop orders", () => {
  const stop = (id: string, side: "bid" | "ask", stopPrice: string, price = "0") =>
    place({
      id,
      side,
      type: price === "0" ? "stop-market" : "stop-limit",
      price,
      stopPrice,
      userId: "u3",
    });

  test("a stop waits in its own book and is accepted with code 106", () => {
    const engine = new MatchingEngine();
    const outcome = run(engine, stop("s1", "bid", "101", "102"));
    expect(outcome.result).toMatchObject({ code: 106, orderStatus: "stop-accepted" });
    expect(types(outcome)).toEqual(["order.stop-accepted.v1"]);
    expect(engine.stopOrdersOf(1)).toHaveLength(1);
    expect(engine.restingOrderCount()).toBe(0);
  });

  test("a buy stop triggers on a trade at exactly its stop price, not one below", () => {
    const engine = engineWith(stop("s1", "bid", "101"), ask("a1", "100"), ask("a2", "101"));
    engine.apply(ask("a3", "102"));
    const below = run(engine, bid("b1", "100"));
    expect(types(below)).not.toContain("order.triggered.v1");
    const at = run(engine, bid("b2", "101"));
    expect(types(at)).toEqual([
      "order.filled.v1",
      "order.filled.v1",
      "deal.executed.v1",
      "order.triggered.v1",
      "order.filled.v1",
      "order.filled.v1",
      "deal.executed.v1",
    ]);
    expect(at.events[3]!.payload).toMatchObject({ orderId: "s1", triggerPrice: "101" });
    expect(at.events[6]!.payload).toMatchObject({ price: "102", takerOrderId: "s1" });
    expect(at.result.triggeredStops).toBe(1);
    expect(at.result.events).toBe(7);
  });

  test("a sell stop triggers on a trade at or below its stop price", () => {
    const engine = engineWith(stop("s1", "ask", "99", "95"), bid("b1", "99"), bid("b2", "98"));
    const outcome = run(engine, ask("a1", "99", "1", "u4"));
    expect(types(outcome)).toContain("order.triggered.v1");
    // The triggered stop-limit sells into the bid at 98.
    expect(outcome.events.at(-1)!.payload).toMatchObject({ price: "98", takerOrderId: "s1" });
  });

  test("stops trigger closest to the trade first, then by arrival", () => {
    const engine = engineWith(
      stop("far", "bid", "100.5", "90"),
      stop("near", "bid", "101", "90"),
      stop("near-later", "bid", "101", "90"),
      ask("a1", "101"),
    );
    const outcome = run(engine, bid("b1", "101"));
    const triggered = outcome.events.filter((e) => e.type === "order.triggered.v1");
    expect(triggered.map((e) => e.payload.orderId)).toEqual(["near", "near-later", "far"]);
  });

  test("a cascade reaches its bound: the stops past it stay armed", () => {
    // Each stop buys one unit at a price one tick higher, which triggers the next stop.
    const commands: CommandEnvelope[] = [];
    const count = MAX_STOP_TRIGGERS + 2;
    for (let i = 0; i <= count; i++) {
      commands.push(ask(`a${i}`, (100 + i / 100).toFixed(2)));
    }
    for (let i = 1; i <= count; i++)
      commands.push(stop(`s${i}`, "bid", (100 + i / 100).toFixed(2)));
    const engine = engineWith(...commands);
    const outcome = run(engine, bid("b0", "100.01", "2"));
    expect(outcome.result.triggeredStops).toBe(MAX_STOP_TRIGGERS);
    expect(engine.stopOrderCount()).toBe(count - MAX_STOP_TRIGGERS);
    // The next trade at the level of the armed stops triggers them.
    const next = run(engine, bid("b1", "100.66", "1", "u5"));
    expect(next.result.triggeredStops).toBeGreaterThan(0);
  });

  test("cancel and amend find stops; a stop cannot be post-only", () => {
    const engine = engineWith(stop("s1", "bid", "101", "102"));
    const amended = run(engine, amend("s1", { stopPrice: "103", price: "104" }, "u3"));
    expect(amended.events[0]!.payload).toMatchObject({
      type: "stop-limit",
      after: { price: "104", stopPrice: "103" },
    });
    const cancelled = run(engine, cancel("s1", "u3"));
    expect(cancelled.events[0]!.payload).toMatchObject({ reason: "user", stopPrice: "103" });
    expect(engine.stopOrderCount()).toBe(0);
    const postOnly = run(
      engine,
      place({ id: "s2", type: "stop-limit", stopPrice: "1", postOnly: true }),
    );
    expect(postOnly.result.code).toBe(ResultCodes.unsupportedCombination);
    const missing = run(engine, place({ id: "s3", type: "stop-market", price: "0" }));
    expect(missing.result.code).toBe(ResultCodes.badEnvelope);
  });

  test("stop depth sums each stop price, nearest to its trigger first, levels a side", () => {
    const engine = engineWith(
      stop("s1", "bid", "101", "102"),
      stop("s2", "bid", "103", "104"),
      stop("s3", "bid", "101", "105"),
      stop("s4", "ask", "95"),
      stop("s5", "ask", "97"),
    );
    expect(engine.stopDepth(1, 1)).toEqual([
      { side: "bid", stopPrice: "101", volume: "2", quoteVolume: "0", orders: 2 },
      { side: "ask", stopPrice: "97", volume: "1", quoteVolume: "0", orders: 1 },
    ]);
    expect(engine.stopDepth(1, 10).map((l) => l.stopPrice)).toEqual(["101", "103", "97", "95"]);
    expect(engine.stopDepth(2, 10)).toEqual([]);
  });

  test("stops reload into a fresh engine with the same digest and trigger order", () => {
    const engine = engineWith(
      stop("s1", "bid", "101", "102"),
      stop("s2", "bid", "101", "102"),
      pairControl("pair.halt", 2),
    );
    const reloaded = new MatchingEngine();
    for (const s of [...engine.stopOrders()].reverse()) reloaded.loadStopOrder(s);
    for (const h of engine.haltedPairs()) reloaded.loadHalt(h.pairId, h.reason);
    reloaded.check();
    expect(reloaded.digest()).toBe(engine.digest());
    expect([...reloaded.stopOrders()]).toEqual([...engine.stopOrders()]);
  });
});

describe("order.cancel-all", () => {
  test("on an empty book: accepted with 0 cancelled", () => {
    const outcome = run(new MatchingEngine(), cancelAll("u1"));
    expect(outcome.result).toMatchObject({ code: ResultCodes.ok, cancelledOrders: 0, events: 0 });
  });

  test("cancels the user's orders and stops in book order, on one pair or all", () => {
    const engine = engineWith(
      bid("b1", "99"),
      bid("b2", "100"),
      ask("a1", "105", "1", "u1"),
      place({ id: "s1", type: "stop-limit", price: "110", stopPrice: "108" }),
      bid("other", "100", "1", "u2"),
      place({ id: "p2", pairId: 2, price: "5" }),
    );
    const one = run(engine, cancelAll("u1", 1));
    expect(one.events.map((e) => e.payload.orderId)).toEqual(["b2", "b1", "a1", "s1"]);
    expect(one.events.every((e) => e.payload.reason === "cancel-all")).toBe(true);
    expect(engine.getOrder("p2")).toBeDefined();
    const all = run(engine, cancelAll("u1"));
    expect(all.result.cancelledOrders).toBe(1);
    expect(engine.getOrder("other")).toBeDefined();
  });

  test(`past ${MAX_CANCEL_ALL} orders it cancels the first ones and says partial`, () => {
    const engine = new MatchingEngine();
    for (let i = 0; i < MAX_CANCEL_ALL + 5; i++) engine.apply(bid(`b${i}`, "100"));
    const first = run(engine, cancelAll("u1"));
    expect(first.result).toMatchObject({
      code: ResultCodes.cancelAllPartial,
      cancelledOrders: MAX_CANCEL_ALL,
    });
    const rest = run(engine, cancelAll("u1"));
    expect(rest.result).toMatchObject({ code: ResultCodes.ok, cancelledOrders: 5 });
  });
});

describe("pair.halt and pair.resume", () => {
  test("a halted pair refuses places and amends, accepts cancels, and resumes", () => {
    const engine = engineWith(bid("b1", "100"));
    const halted = run(engine, pairControl("pair.halt"));
    expect(types(halted)).toEqual(["pair.halted.v1"]);
    expect(halted.changes).toEqual([{ op: "halt", pairId: 1, reason: "maintenance" }]);
    expect(run(engine, ask("a1", "100")).result.code).toBe(ResultCodes.pairHalted);
    expect(run(engine, amend("b1", { volume: "0.5" })).result.code).toBe(ResultCodes.pairHalted);
    expect(
      run(engine, place({ id: "s", type: "stop-market", price: "0", stopPrice: "1" })).result.code,
    ).toBe(ResultCodes.pairHalted);
    expect(run(engine, pairControl("pair.halt")).result.code).toBe(ResultCodes.pairAlreadyHalted);
    expect(run(engine, place({ id: "x", pairId: 2 })).result.code).toBe(ResultCodes.rested);
    expect(run(engine, cancel("b1")).result.code).toBe(ResultCodes.ok);
    expect(run(engine, pairControl("pair.resume")).result.code).toBe(ResultCodes.ok);
    expect(run(engine, pairControl("pair.resume")).result.code).toBe(ResultCodes.pairNotHalted);
    expect(run(engine, bid("b2", "100")).result.code).toBe(ResultCodes.rested);
  });

  test("no halt falls between a stop's trigger and its execution", () => {
    // The trigger and the execution are one command: the halt lands before it (the trade and
    // so the trigger are refused) or after it (the stop has traded already).
    const engine = engineWith(
      place({ id: "s1", type: "stop-market", price: "0", stopPrice: "100", userId: "u3" }),
      ask("a1", "100"),
      ask("a2", "101"),
    );
    run(engine, pairControl("pair.halt"));
    expect(run(engine, bid("b1", "100")).result.code).toBe(ResultCodes.pairHalted);
    expect(engine.stopOrderCount()).toBe(1);
    run(engine, pairControl("pair.resume"));
    const traded = run(engine, bid("b2", "100"));
    expect(types(traded)).toContain("order.triggered.v1");
    expect(engine.stopOrderCount()).toBe(0);
    const haltedAfter = run(engine, pairControl("pair.halt"));
    expect(haltedAfter.result.code).toBe(ResultCodes.ok);
  });
});

test("replay: the same commands give byte-identical events and the same digest", () => {
  const commands: CommandEnvelope[] = [
    place({ id: "s1", type: "stop-limit", price: "103", stopPrice: "101" }),
    place({ id: "a1", side: "ask", price: "101", userId: "u2" }),
    place({ id: "a2", side: "ask", price: "103", userId: "u2" }),
    place({ id: "b1", price: "101" }),
    amend("a2", { price: "102" }, "u2"),
    pairControl("pair.halt"),
    cancelAll("u2"),
  ];
  const transcript = () => {
    const engine = new MatchingEngine();
    const out = commands.map((c) => JSON.stringify(engine.apply(c)));
    return { text: out.join("\n"), digest: engine.digest() };
  };
  const first = transcript();
  expect(transcript()).toEqual(first);
  expect(first.text).toContain("order.triggered.v1");
});
