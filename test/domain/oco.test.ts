// One-cancels-other: two legs in one command; when either fills (even partly), triggers, or
// is cancelled or expires, the other is cancelled in the same command, reason oco.

import { describe, expect, test } from "bun:test";
import {
  decodeCommand,
  MatchingEngine,
  type PlaceOcoCommand,
  type PlaceOrderPayload,
} from "../../src/domain/index";
import { amend, cancel, place, tick } from "./helpers";

let n = 0;
function oco(legs: Partial<PlaceOrderPayload>[], listId = `list-${++n}`): PlaceOcoCommand {
  const full = legs.map((leg, i) => ({ ...place({ id: `${listId}-${i}`, ...leg }).payload }));
  return {
    schemaVersion: 1,
    commandId: `oco-${listId}`,
    correlationId: `corr-${listId}`,
    type: "order.place-oco",
    submittedAt: "2027-01-15T08:00:00.000Z",
    pairId: 1,
    partition: 0,
    payload: { listId, userId: "u1", pairId: 1, legs: full },
  };
}

/** A take-profit ask at 110 and a stop-loss sell stop at 90, around a book at 100. */
const bracket = (listId: string) =>
  oco(
    [
      { side: "ask", price: "110" },
      { side: "ask", type: "stop-market", price: "0", stopPrice: "90" },
    ],
    listId,
  );

const types = (events: { type: string; payload: Record<string, unknown> }[]) =>
  events.map((e) => [e.type, e.payload.orderId ?? e.payload.makerOrderId, e.payload.reason]);

describe("one-cancels-other", () => {
  test("both legs wait, linked; the list's events are numbered as one command's", () => {
    const engine = new MatchingEngine();
    const placed = engine.apply(bracket("b"));
    expect(placed.result).toMatchObject({ status: "accepted", code: 0, listId: "b", events: 2 });
    expect(placed.result.legs!.map((l) => l.codeName)).toEqual(["rested", "stop-accepted"]);
    expect(placed.events.map((e) => [e.ordinal, e.eventId])).toEqual([
      [0, "oco-b:0:order.rested.v1"],
      [1, "oco-b:1:order.stop-accepted.v1"],
    ]);
    expect(engine.getOrder("b-0")).toMatchObject({ listId: "b", linkedOrderId: "b-1" });
    expect(engine.getStopOrder("b-1")).toMatchObject({ listId: "b", linkedOrderId: "b-0" });
    engine.check();
  });

  test("a partial fill of one leg cancels the other in the same command", () => {
    const engine = new MatchingEngine();
    engine.apply(bracket("b"));
    const taker = engine.apply(
      place({ id: "t", side: "bid", price: "110", volume: "0.5", userId: "u2" }),
    );
    expect(types(taker.events)).toEqual([
      ["order.updated.v1", "b-0", undefined],
      ["order.filled.v1", "t", undefined],
      ["deal.executed.v1", "b-0", undefined],
      ["order.cancelled.v1", "b-1", "oco"],
    ]);
    expect(engine.stopOrderCount()).toBe(0);
    expect(engine.getOrder("b-0")!.linkedOrderId).toBeUndefined();
    engine.check();
  });

  test("a trigger of the stop leg cancels the limit leg", () => {
    const engine = new MatchingEngine();
    engine.apply(place({ id: "m", side: "bid", price: "90", userId: "u2" }));
    engine.apply(bracket("b"));
    const trade = engine.apply(
      place({ id: "t", side: "ask", price: "90", volume: "0.5", userId: "u3" }),
    );
    const shape = types(trade.events);
    expect(shape.slice(0, 4)).toEqual([
      ["order.updated.v1", "m", undefined],
      ["order.filled.v1", "t", undefined],
      ["deal.executed.v1", "m", undefined],
      ["order.triggered.v1", "b-1", undefined],
    ]);
    expect(shape[4]).toEqual(["order.cancelled.v1", "b-0", "oco"]);
    expect(engine.getOrder("b-0")).toBeUndefined();
    engine.check();
  });

  test("cancelling either leg cancels both; an expiry too", () => {
    const engine = new MatchingEngine();
    engine.apply(bracket("b"));
    expect(types(engine.apply(cancel("b-1")).events)).toEqual([
      ["order.cancelled.v1", "b-1", "user"],
      ["order.cancelled.v1", "b-0", "oco"],
    ]);
    engine.apply(tick(1_800_000_000_000));
    engine.apply(
      oco(
        [
          { side: "ask", price: "110", timeInForce: "gtd", expireAt: 1_800_000_000_100 },
          { side: "ask", price: "111" },
        ],
        "g",
      ),
    );
    expect(types(engine.apply(tick(1_800_000_000_100)).events)).toEqual([
      ["order.expired.v1", "g-0", undefined],
      ["order.cancelled.v1", "g-1", "oco"],
    ]);
    expect(engine.restingOrderCount()).toBe(0);
    engine.check();
  });

  test("a first leg that trades on arrival leaves the second unplaced, cancelled", () => {
    const engine = new MatchingEngine();
    engine.apply(place({ id: "m", side: "bid", price: "100", userId: "u2" }));
    const placed = engine.apply(
      oco(
        [
          { side: "ask", price: "100" },
          { side: "ask", price: "120" },
        ],
        "x",
      ),
    );
    expect(placed.result.legs!.map((l) => [l.orderId, l.orderStatus])).toEqual([
      ["x-0", "filled"],
      ["x-1", "cancelled"],
    ]);
    expect(types(placed.events).at(-1)).toEqual(["order.cancelled.v1", "x-1", "oco"]);
    expect(engine.restingOrderCount()).toBe(0);
    expect(engine.apply(cancel("x-1")).result.codeName).toBe("order-already-finished");
  });

  test("one taker cannot fill both legs of a list on one side", () => {
    const engine = new MatchingEngine();
    engine.apply(
      oco(
        [
          { side: "ask", price: "101" },
          { side: "ask", price: "102" },
        ],
        "two",
      ),
    );
    const fok = engine.apply(
      place({ id: "f", side: "bid", price: "102", volume: "2", userId: "u2", timeInForce: "fok" }),
    );
    expect(fok.result.codeName).toBe("fok-not-filled");
    const sweep = engine.apply(
      place({ id: "s", side: "bid", price: "102", volume: "2", userId: "u2" }),
    );
    expect(types(sweep.events).filter((e) => e[0] === "deal.executed.v1")).toHaveLength(1);
    expect(sweep.result).toMatchObject({
      executedVolume: "1",
      orderStatus: "partially-filled-rested",
    });
    engine.check();
  });

  test("a list is refused whole: bad legs, a market leg, mixed stp, duplicates", () => {
    const engine = new MatchingEngine();
    const code = (command: PlaceOcoCommand) => engine.apply(command).result.codeName;
    expect(
      code(
        oco([
          { side: "ask", price: "110" },
          { side: "ask", price: "x" },
        ]),
      ),
    ).toBe("bad-decimal");
    expect(
      code(
        oco([
          { side: "ask", price: "110" },
          { type: "market", price: "0" },
        ]),
      ),
    ).toBe("unsupported-combination");
    expect(
      code(
        oco([
          { side: "ask", price: "110", stp: "cancel-maker" },
          { side: "ask", price: "111" },
        ]),
      ),
    ).toBe("unsupported-combination");
    expect(engine.restingOrderCount()).toBe(0);
    engine.apply(bracket("d"));
    expect(engine.apply(bracket("d")).result.codeName).toBe("duplicate-order");
    expect(decodeCommand(bracket("e")).ok).toBe(true);
  });

  test("reloads linked, with the same digest", () => {
    const engine = new MatchingEngine();
    engine.apply(bracket("b"));
    const reloaded = new MatchingEngine();
    for (const order of engine.restingOrders()) reloaded.loadRestingOrder(order);
    for (const stop of engine.stopOrders()) reloaded.loadStopOrder(stop);
    reloaded.check();
    expect(reloaded.digest()).toBe(engine.digest());
    expect(types(reloaded.apply(cancel("b-0")).events)).toEqual([
      ["order.cancelled.v1", "b-0", "user"],
      ["order.cancelled.v1", "b-1", "oco"],
    ]);
  });
});

test("an amend that re-matches a leg into a trade cancels the other leg", () => {
  const engine = new MatchingEngine();
  engine.apply(place({ id: "m", side: "bid", price: "105", userId: "u2" }));
  engine.apply(
    oco(
      [
        { side: "ask", price: "110" },
        { side: "ask", price: "111" },
      ],
      "am",
    ),
  );
  const moved = engine.apply(amend("am-0", { price: "105" }));
  expect(types(moved.events).at(-1)).toEqual(["order.cancelled.v1", "am-1", "oco"]);
  expect(moved.result.events).toBe(moved.events.length);
  engine.check();
});

test("a cancel-all takes both legs once: the second goes as the first's other leg", () => {
  const engine = new MatchingEngine();
  engine.apply(bracket("ca"));
  const all = engine.apply({
    schemaVersion: 1,
    commandId: "ca-all",
    correlationId: "c",
    type: "order.cancel-all",
    submittedAt: "2027-01-15T08:00:00.000Z",
    pairId: 1,
    partition: 0,
    payload: { userId: "u1", pairId: 1 },
  });
  expect(types(all.events)).toEqual([
    ["order.cancelled.v1", "ca-0", "cancel-all"],
    ["order.cancelled.v1", "ca-1", "oco"],
  ]);
  expect(all.result.cancelledOrders).toBe(2);
  engine.check();
});
