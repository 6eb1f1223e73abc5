// Table-driven behaviour tests of MatchingEngine: every order kind, edge and reject, with event
// types, payload fields, results and book state checked after each case.

import { describe, expect, test } from "bun:test";
import {
  type CommandOutcome,
  EMPTY_BOOKS_SWEEP_FLOOR,
  MatchingEngine,
  MatchingInvariantError,
  type PlaceOrderPayload,
  ResultCodes,
} from "../../src/domain/index";
import { cancel, place } from "./helpers";

const types = (outcome: CommandOutcome) => outcome.events.map((e) => e.type);
const payload = (outcome: CommandOutcome, index: number) => outcome.events[index]!.payload;

/** A market bid sized in quote currency: it buys what `quoteVolume` pays for. */
function quoteBid(id: string, quoteVolume: string, precisions: Partial<PlaceOrderPayload>) {
  return place({
    id,
    type: "market",
    price: "0",
    volume: "0",
    volumeTotal: "0",
    quoteVolume,
    ...precisions,
  });
}

function engineWith(...commands: ReturnType<typeof place>[]): MatchingEngine {
  const engine = new MatchingEngine();
  for (const command of commands) expect(engine.apply(command).result.status).toBe("accepted");
  return engine;
}

describe("limit orders", () => {
  test("a resting limit bid emits exactly one order.rested.v1", () => {
    const engine = new MatchingEngine();
    const out = engine.apply(place({ id: "b1" }));
    expect(types(out)).toEqual(["order.rested.v1"]);
    expect(out.result).toMatchObject({
      status: "accepted",
      code: ResultCodes.rested,
      orderStatus: "rested",
    });
    expect(out.changes).toEqual([
      { op: "put", order: expect.objectContaining({ id: "b1", volume: "1" }) },
    ]);
    expect(out.acceptedOrderId).toBe("b1");
    expect(out.events[0]!.eventId).toBe(`${out.result.commandId}:0:order.rested.v1`);
    engine.check();
  });

  test("a limit ask that fully fills one bid emits maker filled, taker filled, deal", () => {
    const engine = engineWith(place({ id: "b1", userId: "u1" }));
    const out = engine.apply(place({ id: "a1", userId: "u2", side: "ask" }));
    expect(types(out)).toEqual(["order.filled.v1", "order.filled.v1", "deal.executed.v1"]);
    expect(payload(out, 0)).toMatchObject({ orderId: "b1", role: "maker", volume: "0" });
    expect(payload(out, 1)).toMatchObject({ orderId: "a1", role: "taker" });
    expect(payload(out, 2)).toMatchObject({
      makerOrderId: "b1",
      takerOrderId: "a1",
      price: "100",
      volume: "1",
      quoteVolume: "100",
    });
    expect(out.events.map((e) => e.ordinal)).toEqual([0, 1, 2]);
    expect(engine.restingOrderCount()).toBe(0);
    engine.check();
  });

  test("partial fills across several levels trade at the makers' prices, best first", () => {
    const engine = engineWith(
      place({ id: "a1", side: "ask", price: "101", volume: "1", userId: "m" }),
      place({ id: "a2", side: "ask", price: "100", volume: "0.5", userId: "m" }),
      place({ id: "a3", side: "ask", price: "102", volume: "2", userId: "m" }),
    );
    const out = engine.apply(place({ id: "b1", price: "101.5", volume: "2" }));
    expect(types(out)).toEqual([
      "order.filled.v1",
      "deal.executed.v1",
      "order.filled.v1",
      "deal.executed.v1",
      "order.rested.v1",
    ]);
    expect(payload(out, 1)).toMatchObject({ price: "100", volume: "0.5", makerOrderId: "a2" });
    expect(payload(out, 3)).toMatchObject({ price: "101", volume: "1", makerOrderId: "a1" });
    expect(payload(out, 4)).toMatchObject({ orderId: "b1", volume: "0.5", executedVolume: "1.5" });
    expect(out.result).toMatchObject({
      orderStatus: "partially-filled-rested",
      executedVolume: "1.5",
      remainingVolume: "0.5",
    });
    expect(engine.depth(1, 5)).toEqual({
      bids: [{ price: "101.5", volume: "0.5", orders: 1 }],
      asks: [{ price: "102", volume: "2", orders: 1 }],
    });
    engine.check();
  });

  test("FIFO within a level and order.updated.v1 for a partly filled maker", () => {
    const engine = engineWith(
      place({ id: "b1", volume: "2", userId: "m" }),
      place({ id: "b2", volume: "2", userId: "m" }),
    );
    const out = engine.apply(place({ id: "a1", side: "ask", volume: "1.25" }));
    expect(types(out)).toEqual(["order.updated.v1", "order.filled.v1", "deal.executed.v1"]);
    expect(payload(out, 0)).toMatchObject({ orderId: "b1", volume: "0.75", fillVolume: "1.25" });
    expect(out.changes).toEqual([
      { op: "put", order: expect.objectContaining({ id: "b1", volume: "0.75" }) },
    ]);
    expect(engine.getOrder("b1")?.volume).toBe("0.75");
  });

  test("IOC cancels the unfilled rest", () => {
    const engine = engineWith(place({ id: "a1", side: "ask", volume: "1", userId: "m" }));
    const out = engine.apply(place({ id: "b1", volume: "3", timeInForce: "ioc" }));
    expect(types(out)).toEqual(["order.filled.v1", "deal.executed.v1", "order.cancelled.v1"]);
    expect(payload(out, 2)).toMatchObject({ reason: "ioc", volume: "2", executedVolume: "1" });
    expect(out.result).toMatchObject({
      orderStatus: "cancelled",
      code: ResultCodes.remainderCancelled,
    });
  });

  // Quotes round to quoteDecimals in the book's favour: up when the maker sells, down when it buys.
  const dust = { priceDecimals: 2, amountDecimals: 8, quoteDecimals: 2 };

  test("a deal against a resting ask rounds its quote up: the ask is never paid less than its price", () => {
    const engine = engineWith(
      place({ id: "a1", side: "ask", price: "0.03", volume: "0.33333333", userId: "m", ...dust }),
    );
    const out = engine.apply(place({ id: "b1", price: "0.03", volume: "0.33333333", ...dust }));
    // 0.03 x 0.33333333 = 0.0099999999 -> 0.01.
    expect(payload(out, 2)).toMatchObject({ volume: "0.33333333", quoteVolume: "0.01" });
  });

  test("dust bought from a resting ask costs one quote unit, never nothing", () => {
    const engine = engineWith(
      place({ id: "a1", side: "ask", price: "100", volume: "1", userId: "m", ...dust }),
    );
    const out = engine.apply(place({ id: "b1", price: "100", volume: "0.00001", ...dust }));
    expect(types(out)).toEqual(["order.updated.v1", "order.filled.v1", "deal.executed.v1"]);
    expect(payload(out, 2)).toMatchObject({ volume: "0.00001", quoteVolume: "0.01" });
    engine.check();
  });

  test("a deal against a resting bid rounds its quote down: the bid never pays more than its price", () => {
    const engine = engineWith(place({ id: "b1", price: "100", volume: "1", userId: "m", ...dust }));
    const out = engine.apply(
      place({ id: "a1", side: "ask", price: "100", volume: "0.00001", ...dust }),
    );
    // 100 x 0.00001 = 0.001 -> 0.00: the taker chose to sell dust at the bid's price.
    expect(payload(out, 2)).toMatchObject({ volume: "0.00001", quoteVolume: "0" });
    engine.check();
  });
});

describe("post-only and fill-or-kill", () => {
  test("post-only that would take is rejected and the book is untouched", () => {
    const engine = engineWith(place({ id: "a1", side: "ask", price: "100", userId: "m" }));
    const before = engine.digest();
    const out = engine.apply(place({ id: "b1", price: "100", postOnly: true }));
    expect(types(out)).toEqual(["order.rejected.v1"]);
    expect(out.result).toMatchObject({ status: "rejected", code: ResultCodes.postOnlyWouldTake });
    expect(out.changes).toEqual([]);
    expect(engine.digest()).toBe(before);
  });

  test("post-only that does not cross rests", () => {
    const engine = engineWith(place({ id: "a1", side: "ask", price: "100", userId: "m" }));
    expect(types(engine.apply(place({ id: "b1", price: "99.99", postOnly: true })))).toEqual([
      "order.rested.v1",
    ]);
  });

  test("FOK with insufficient liquidity is cancelled with reason fok and changes nothing", () => {
    const engine = engineWith(place({ id: "a1", side: "ask", volume: "1", userId: "m" }));
    const before = engine.digest();
    const out = engine.apply(place({ id: "b1", volume: "2", timeInForce: "fok" }));
    expect(types(out)).toEqual(["order.cancelled.v1"]);
    expect(payload(out, 0)).toMatchObject({ reason: "fok", code: ResultCodes.fokNotFilled });
    expect(engine.digest()).toBe(before);
    expect(out.acceptedOrderId).toBe("b1");
  });

  test("FOK with enough liquidity fills completely", () => {
    const engine = engineWith(
      place({ id: "a1", side: "ask", volume: "1", userId: "m" }),
      place({ id: "a2", side: "ask", volume: "1", price: "100.5", userId: "m" }),
    );
    const out = engine.apply(place({ id: "b1", volume: "2", price: "101", timeInForce: "fok" }));
    expect(out.result).toMatchObject({ orderStatus: "filled", executedVolume: "2" });
  });
});

describe("market orders", () => {
  test("market into an empty book cancels the remainder", () => {
    const out = new MatchingEngine().apply(place({ id: "m1", type: "market", price: "0" }));
    expect(types(out)).toEqual(["order.cancelled.v1"]);
    expect(payload(out, 0)).toMatchObject({ reason: "market-remainder", volume: "1" });
    expect(out.result).toMatchObject({ status: "accepted", orderStatus: "cancelled" });
  });

  test("market by base volume sweeps levels and never rests", () => {
    const engine = engineWith(
      place({ id: "b1", price: "100", userId: "m" }),
      place({ id: "b2", price: "90", userId: "m" }),
    );
    const out = engine.apply(
      place({ id: "s1", side: "ask", type: "market", price: "0", volume: "3" }),
    );
    expect(types(out)).toEqual([
      "order.filled.v1",
      "deal.executed.v1",
      "order.filled.v1",
      "deal.executed.v1",
      "order.cancelled.v1",
    ]);
    expect(payload(out, 4)).toMatchObject({
      reason: "market-remainder",
      volume: "1",
      executedVolume: "2",
    });
    expect(engine.restingOrderCount()).toBe(0);
  });

  test("quote-sized market bid rounds volume down so spending never exceeds the budget", () => {
    const engine = engineWith(
      place({
        id: "a1",
        side: "ask",
        price: "3",
        volume: "10",
        userId: "m",
        amountDecimals: 2,
        quoteDecimals: 2,
      }),
    );
    const out = engine.apply(
      place({
        id: "q1",
        type: "market",
        price: "0",
        volume: "0",
        volumeTotal: "0",
        quoteVolume: "10",
        amountDecimals: 2,
        quoteDecimals: 2,
      }),
    );
    // 10 / 3 = 3.333… -> 3.33 bought for 9.99; 0.01 of budget is left and cancelled.
    expect(types(out)).toEqual(["order.updated.v1", "deal.executed.v1", "order.cancelled.v1"]);
    expect(payload(out, 1)).toMatchObject({ volume: "3.33", quoteVolume: "9.99" });
    expect(payload(out, 2)).toMatchObject({
      reason: "market-remainder",
      quoteVolume: "0.01",
      executedVolume: "3.33",
    });
  });

  test("quote-sized market bid pays a rounded-up quote, within its budget", () => {
    // 0.01 affords 3.33 at 0.003; 3.33 x 0.003 = 0.00999 rounds up to the whole budget.
    const precisions = { priceDecimals: 3, amountDecimals: 2, quoteDecimals: 2 };
    const engine = engineWith(
      place({
        id: "a1",
        side: "ask",
        price: "0.003",
        volume: "1000000",
        userId: "m",
        ...precisions,
      }),
    );
    const out = engine.apply(quoteBid("q1", "0.01", precisions));
    expect(types(out)).toEqual(["order.updated.v1", "order.filled.v1", "deal.executed.v1"]);
    expect(payload(out, 2)).toMatchObject({ volume: "3.33", quoteVolume: "0.01" });
    expect(out.result).toMatchObject({ orderStatus: "filled", executedVolume: "3.33" });
    engine.check();
  });

  test("quote-sized market bid never buys more than its budget pays for at the maker's price", () => {
    // 3 affords one unit at 1.9, which costs 1.9 -> 2; the 1 left buys nothing more.
    const precisions = { priceDecimals: 1, amountDecimals: 0, quoteDecimals: 0 };
    const engine = engineWith(
      place({ id: "a1", side: "ask", price: "1.9", volume: "10", userId: "m", ...precisions }),
    );
    const out = engine.apply(quoteBid("q1", "3", precisions));
    expect(types(out)).toEqual(["order.updated.v1", "deal.executed.v1", "order.cancelled.v1"]);
    expect(payload(out, 1)).toMatchObject({ volume: "1", quoteVolume: "2" });
    expect(payload(out, 2)).toMatchObject({ reason: "market-remainder", quoteVolume: "1" });
    expect(out.result).toMatchObject({ orderStatus: "cancelled", executedVolume: "1" });
    engine.check();
  });

  test("a dust ask at the best price does not stop a quote-sized market bid", () => {
    const precisions = { priceDecimals: 2, amountDecimals: 8, quoteDecimals: 2 };
    const engine = engineWith(
      place({ id: "a1", side: "ask", price: "100", volume: "0.00001", userId: "m", ...precisions }),
      place({ id: "a2", side: "ask", price: "100", volume: "1", userId: "m", ...precisions }),
    );
    const out = engine.apply(quoteBid("q1", "50", precisions));
    expect(types(out)).toEqual([
      "order.filled.v1",
      "deal.executed.v1",
      "order.updated.v1",
      "order.filled.v1",
      "deal.executed.v1",
    ]);
    // The dust costs 0.01; the 49.99 left buys 0.4999 at 100.
    expect(payload(out, 1)).toMatchObject({ volume: "0.00001", quoteVolume: "0.01" });
    expect(payload(out, 4)).toMatchObject({ volume: "0.4999", quoteVolume: "49.99" });
    expect(out.result).toMatchObject({ orderStatus: "filled", executedVolume: "0.49991" });
    engine.check();
  });

  test("quote-sized market bid that spends its whole budget is filled", () => {
    const engine = engineWith(
      place({ id: "a1", side: "ask", price: "2", volume: "10", userId: "m" }),
    );
    const out = engine.apply(
      place({
        id: "q1",
        type: "market",
        price: "0",
        volume: "0",
        volumeTotal: "0",
        quoteVolume: "5",
      }),
    );
    expect(types(out)).toEqual(["order.updated.v1", "order.filled.v1", "deal.executed.v1"]);
    expect(out.result).toMatchObject({ orderStatus: "filled", executedVolume: "2.5" });
  });
});

describe("self-trade prevention", () => {
  const setup = () =>
    engineWith(
      place({ id: "a1", side: "ask", userId: "me", volume: "1" }),
      place({ id: "a2", side: "ask", userId: "other", volume: "1" }),
    );
  test.each([
    [
      "none",
      [
        "order.filled.v1",
        "deal.executed.v1",
        "order.filled.v1",
        "order.filled.v1",
        "deal.executed.v1",
      ],
      0,
    ],
    ["cancel-taker", ["order.cancelled.v1"], 2],
    [
      "cancel-maker",
      ["order.cancelled.v1", "order.filled.v1", "deal.executed.v1", "order.rested.v1"],
      1,
    ],
    ["cancel-both", ["order.cancelled.v1", "order.cancelled.v1"], 1],
  ] as const)("stp %s", (stp, expected, resting) => {
    const engine = setup();
    const out = engine.apply(place({ id: "b1", userId: "me", volume: "2", stp }));
    expect(types(out)).toEqual([...expected]);
    expect(engine.restingOrderCount()).toBe(resting);
    if (stp !== "none") expect(out.events.some((e) => e.payload.reason === "stp")).toBe(true);
    engine.check();
  });
});

describe("cancel", () => {
  test("cancels a resting order", () => {
    const engine = engineWith(place({ id: "b1" }));
    const out = engine.apply(cancel("b1"));
    expect(types(out)).toEqual(["order.cancelled.v1"]);
    expect(payload(out, 0)).toMatchObject({ reason: "user", volume: "1" });
    expect(out.changes).toEqual([{ op: "remove", order: expect.objectContaining({ id: "b1" }) }]);
    expect(engine.restingOrderCount()).toBe(0);
  });

  test.each([
    ["unknown", (e: MatchingEngine) => e, "nope", "u1", ResultCodes.unknownOrder],
    [
      "already cancelled",
      (e: MatchingEngine) => {
        e.apply(cancel("b1"));
        return e;
      },
      "b1",
      "u1",
      ResultCodes.orderAlreadyFinished,
    ],
    [
      "filled",
      (e: MatchingEngine) => {
        e.apply(place({ id: "a1", side: "ask", userId: "u2" }));
        return e;
      },
      "b1",
      "u1",
      ResultCodes.orderAlreadyFinished,
    ],
    ["not owner", (e: MatchingEngine) => e, "b1", "u9", ResultCodes.notOwner],
  ] as const)("%s is a rejection with an order.rejected.v1", (_name, prepare, id, userId, code) => {
    const engine = prepare(engineWith(place({ id: "b1" })));
    const out = engine.apply(cancel(id, userId));
    expect(out.result).toMatchObject({ status: "rejected", code });
    expect(types(out)).toEqual(["order.rejected.v1"]);
    expect(out.changes).toEqual([]);
  });

  test("a finished order the engine no longer remembers is still finished when the shell's marker says it was accepted", () => {
    // A memory of two finished ids: b1's fill is forgotten after two more finishes (as after a
    // restart, when the memory starts empty).
    const engine = new MatchingEngine({ recentMemory: 2 });
    engine.apply(place({ id: "b1" }));
    engine.apply(place({ id: "a1", side: "ask", userId: "u2" }));
    for (const id of ["m1", "m2", "m3"]) engine.apply(place({ id, type: "market", price: "0" }));
    expect(engine.apply(cancel("b1")).result.code).toBe(ResultCodes.unknownOrder);
    const marked = engine.apply(cancel("b1"), true);
    expect(marked.result).toMatchObject({
      status: "rejected",
      code: ResultCodes.orderAlreadyFinished,
    });
    // A resting order is cancelled whatever the marker says.
    engine.apply(place({ id: "b2" }));
    expect(engine.apply(cancel("b2"), true).result.status).toBe("accepted");
  });
});

describe("duplicates", () => {
  test("a resting, finished or shell-marked order id is a duplicate with no events", () => {
    const engine = engineWith(place({ id: "b1" }), place({ id: "x1", type: "market", price: "0" }));
    const before = engine.digest();
    for (const [command, marked] of [
      [place({ id: "b1" }), false],
      [place({ id: "x1" }), false],
      [place({ id: "new" }), true],
    ] as const) {
      const out = engine.apply(command, marked);
      expect(out.result).toMatchObject({
        status: "duplicate",
        code: ResultCodes.duplicateOrder,
        events: 0,
      });
      expect(out.events).toEqual([]);
      expect(out.changes).toEqual([]);
    }
    expect(engine.digest()).toBe(before);
  });

  test("recent memory is bounded: old finished ids are forgotten", () => {
    const engine = new MatchingEngine({ recentMemory: 4 });
    for (let i = 0; i < 10; i++) engine.apply(place({ id: `m${i}`, type: "market", price: "0" }));
    expect(engine.apply(place({ id: "m0", type: "market", price: "0" })).result.status).toBe(
      "accepted",
    );
    expect(engine.apply(place({ id: "m9", type: "market", price: "0" })).result.status).toBe(
      "duplicate",
    );
  });
});

describe("validation rejects", () => {
  test("a command of an unknown type is rejected whatever its payload holds", () => {
    const engine = new MatchingEngine();
    for (const body of [null, 5, "x", { id: 7 }, { id: "o1", userId: "u1" }]) {
      const command = { ...place({ id: "o1" }), type: "order.weird", payload: body };
      const outcome = engine.apply(command as unknown as Parameters<MatchingEngine["apply"]>[0]);
      expect(outcome.result).toMatchObject({
        status: "rejected",
        code: ResultCodes.unknownCommandType,
      });
      expect(types(outcome)).toEqual(["order.rejected.v1"]);
    }
  });

  test.each([
    ["price precision", { price: "100.001" }, ResultCodes.precisionExceeded],
    ["volume precision", { volume: "0.000000001" }, ResultCodes.precisionExceeded],
    ["zero price", { price: "0" }, ResultCodes.nonPositive],
    ["zero volume", { volume: "0" }, ResultCodes.nonPositive],
    ["negative volume", { volume: "-1" }, ResultCodes.nonPositive],
    ["non-numeric price", { price: "abc" }, ResultCodes.badDecimal],
    ["a sign before no number", { price: "-abc" }, ResultCodes.badDecimal],
    ["a minus sign inside a number", { volume: "1-2", volumeTotal: "3" }, ResultCodes.badDecimal],
    [
      "market order with a non-numeric price",
      { type: "market", price: "abc" },
      ResultCodes.badDecimal,
    ],
    [
      "market order with a negative price",
      { type: "market", price: "-5" },
      ResultCodes.nonPositive,
    ],
    ["exponent", { price: "1e2" }, ResultCodes.badDecimal],
    [
      "absurd magnitude",
      { volume: "1000000000000000", volumeTotal: "1000000000000000" },
      ResultCodes.magnitudeExceeded,
    ],
    ["volume above total", { volume: "2", volumeTotal: "1" }, ResultCodes.volumeExceedsTotal],
    ["bad decimals", { priceDecimals: 19 }, ResultCodes.badPrecision],
    ["post-only market", { type: "market", postOnly: true }, ResultCodes.unsupportedCombination],
    [
      "quote-sized market bid with a base volume too (it could fill past that volume)",
      { type: "market", price: "0", quoteVolume: "10" },
      ResultCodes.unsupportedCombination,
    ],
    [
      "quoteVolume precision",
      { type: "market", price: "0", volume: "0", volumeTotal: "0", quoteVolume: "1.000000001" },
      ResultCodes.precisionExceeded,
    ],
    ["exponent in a volume", { volume: "1E0" }, ResultCodes.badDecimal],
    ["negative price", { price: "-100" }, ResultCodes.nonPositive],
    ["pair mismatch", { pairId: 2 }, ResultCodes.pairMismatch],
  ] as const)("%s", (_name, fields, code) => {
    const engine = new MatchingEngine();
    const command = place({ id: "o1", ...fields }, { pairId: 1 });
    const out = engine.apply(command);
    expect(out.result).toMatchObject({
      status: "rejected",
      code,
      orderStatus: "rejected",
      events: 1,
    });
    expect(types(out)).toEqual(["order.rejected.v1"]);
    expect(payload(out, 0)).toMatchObject({ code, orderId: "o1" });
    expect(out.acceptedOrderId).toBeUndefined();
    expect(engine.restingOrderCount()).toBe(0);
  });

  test("precisions differing from the pair's resting orders are rejected", () => {
    const engine = engineWith(place({ id: "b1" }));
    const out = engine.apply(place({ id: "b2", amountDecimals: 4 }));
    expect(out.result.code).toBe(ResultCodes.pairPrecisionMismatch);
  });

  test("reject() builds an order.rejected.v1 outcome from partial information", () => {
    const out = new MatchingEngine().reject(
      { commandId: "c1", pairId: 3, orderId: "o1" },
      ResultCodes.partitionMismatch,
      "wrong partition",
    );
    expect(out.result).toMatchObject({
      commandId: "c1",
      status: "rejected",
      code: 206,
      codeName: "partition-mismatch",
    });
    expect(out.events[0]).toMatchObject({
      eventId: "c1:0:order.rejected.v1",
      pairId: 3,
      occurredAt: "1970-01-01T00:00:00.000Z",
    });
    expect(out.changes).toEqual([]);
  });
});

describe("state management", () => {
  test("loadRestingOrder rebuilds FIFO by sequence and keeps sequences increasing", () => {
    const source = engineWith(
      place({ id: "b1" }),
      place({ id: "b2" }),
      place({ id: "b3", price: "99" }),
    );
    const orders = [...source.restingOrders()].reverse();
    const copy = new MatchingEngine();
    for (const order of orders) copy.loadRestingOrder(order);
    copy.check();
    expect(copy.digest()).toBe(source.digest());
    copy.apply(place({ id: "b4" }));
    expect(copy.getOrder("b4")!.sequence).toBeGreaterThan(
      Math.max(...orders.map((o) => o.sequence)),
    );
  });

  test("a broken datastore order throws MatchingInvariantError", () => {
    const engine = engineWith(place({ id: "b1" }));
    const good = engine.getOrder("b1")!;
    for (const broken of [
      { volume: "-1" },
      { volume: "2", volumeTotal: "1" },
      { side: "buy" },
      { stp: "cancel-everything" },
    ]) {
      const order = { ...good, id: "b2", ...broken } as typeof good;
      expect(() => engine.loadRestingOrder(order)).toThrow(MatchingInvariantError);
    }
    // Bounds a placed order passed, each loaded into an empty engine (on pair 1, beside b1,
    // a precision mismatch would throw first) and named by its own reason.
    for (const [broken, reason] of [
      [{ priceDecimals: 2.5 }, "bad priceDecimals"],
      [{ amountDecimals: 60 }, "bad amountDecimals"],
      [{ quoteDecimals: -1 }, "bad quoteDecimals"],
      [{ pairId: 0 }, "bad pairId"],
      [{ pairId: 1.5 }, "bad pairId"],
      [{ timestamp: -5 }, "bad timestamp"],
    ] as const) {
      const order = { ...good, id: "b2", ...broken } as typeof good;
      expect(() => new MatchingEngine().loadRestingOrder(order)).toThrow(reason);
    }
  });

  test("check() throws on a broken book: crossed sides, a level total that lies, FIFO out of order", () => {
    const source = engineWith(place({ id: "b1" }), place({ id: "b2" }));
    const [b1, b2] = [source.getOrder("b1")!, source.getOrder("b2")!];
    // Crossed: datastore orders are loaded as they are, and the check is what catches them.
    const crossed = new MatchingEngine();
    crossed.loadRestingOrder(b1);
    crossed.loadRestingOrder({ ...b2, id: "a1", side: "ask", price: "99" });
    expect(() => crossed.check()).toThrow(MatchingInvariantError);
    // Tampered with from outside (the check must not trust the engine's own bookkeeping).
    const tampered = engineWith(place({ id: "b1" }), place({ id: "b2" }));
    const book = tampered.state.books.get(1)!;
    const level = book.bids[book.bids.length - 1]!;
    level.total = level.total === 0 ? 1 : 0;
    expect(() => tampered.check()).toThrow(MatchingInvariantError);
    const reordered = engineWith(place({ id: "b1" }), place({ id: "b2" }));
    const head = reordered.state.books.get(1)!.bids[0]!.head!;
    const sequence = head.sequence;
    head.sequence = head.next!.sequence;
    head.next!.sequence = sequence;
    expect(() => reordered.check()).toThrow(MatchingInvariantError);
    // A book node that is not the node its id finds (counts and levels all agree).
    const stale = engineWith(place({ id: "b1" }));
    const only = stale.state.books.get(1)!.bids[0]!;
    const copy = { ...only.head! };
    only.head = copy;
    only.tail = copy;
    expect(() => stale.check()).toThrow("is not the one its id finds");
  });

  test("a taker that leaves nothing resting on a new pair leaves no empty book behind", () => {
    const engine = new MatchingEngine();
    const books = engine.state.books;
    for (let pairId = 1; pairId <= 50; pairId++) {
      engine.apply(place({ id: `m${pairId}`, pairId, type: "market", price: "0" }));
      engine.apply(place({ id: `i${pairId}`, pairId, timeInForce: "ioc" }));
    }
    expect(books.size).toBe(0);
    engine.apply(place({ id: "r1", pairId: 7 }));
    expect(books.size).toBe(1);
    engine.check();
  });

  test("empty books of pairs that come and go are swept; books with orders are kept", () => {
    const engine = engineWith(place({ id: "keep", pairId: 1, userId: "m" }));
    let most = 0;
    for (let pairId = 2; pairId <= 3 * EMPTY_BOOKS_SWEEP_FLOOR; pairId++) {
      // Each pair gets one order, which then leaves: a cancel, or a fill by a second order.
      engine.apply(place({ id: `r${pairId}`, pairId }));
      if (pairId % 2 === 0) engine.apply(cancel(`r${pairId}`, "u1", pairId));
      else engine.apply(place({ id: `t${pairId}`, pairId, side: "ask", userId: "u2" }));
      expect(engine.restingOrderCount(pairId)).toBe(0);
      most = Math.max(most, engine.bookCount());
    }
    // Without the sweep every pair would keep its empty book: 3 x the floor of them.
    expect(most).toBe(EMPTY_BOOKS_SWEEP_FLOOR);
    expect(engine.bookCount()).toBeLessThan(EMPTY_BOOKS_SWEEP_FLOOR);
    engine.check();
    expect(engine.restingOrderCount(1)).toBe(1);
    // The kept book still trades, and a swept pair starts again with any precisions.
    const fill = engine.apply(place({ id: "taker", pairId: 1, side: "ask", userId: "t" }));
    expect(types(fill)).toEqual(["order.filled.v1", "order.filled.v1", "deal.executed.v1"]);
    const again = engine.apply(place({ id: "again", pairId: 2, priceDecimals: 4 }));
    expect(again.result.orderStatus).toBe("rested");
    engine.check();
  });

  test("a fill that would break conservation throws before it changes anything", () => {
    const engine = engineWith(place({ id: "b1", volume: "2", userId: "m" }));
    // Corrupt the resting bid the way only a bug could: it claims to have been accepted with
    // less than it still holds, so any fill would leave it above its accepted volume.
    const books = engine.state.books;
    books.get(1)!.bids[0]!.head!.accepted = 0;
    const before = engine.digest();
    expect(() => engine.apply(place({ id: "a1", side: "ask", volume: "1" }))).toThrow(
      MatchingInvariantError,
    );
    expect(engine.digest()).toBe(before);
    expect(engine.getOrder("b1")?.volume).toBe("2");
  });

  test("clear empties everything", () => {
    const engine = engineWith(place({ id: "b1" }));
    engine.clear();
    expect(engine.restingOrderCount()).toBe(0);
    expect(engine.apply(place({ id: "b1" })).result.status).toBe("accepted");
  });
});
