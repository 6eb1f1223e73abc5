// Iceberg orders: only the part shown is in the book and its depth; when it fills, the next
// part is shown at the back of its level; the hidden part is cancelled, expired and counted.

import { describe, expect, test } from "bun:test";
import { MatchingEngine } from "../../src/domain/index";
import { amend, cancel, place } from "./helpers";

const ice = (id: string, volume: string, displayVolume: string, more: object = {}) =>
  place({ id, side: "ask", price: "100", volume, displayVolume, ...more });

describe("iceberg orders", () => {
  test("rests showing only its display: the depth and the event say so", () => {
    const engine = new MatchingEngine();
    const rested = engine.apply(ice("i", "10", "2"));
    expect(rested.result.codeName).toBe("rested");
    expect(rested.events[0]!.payload).toMatchObject({
      volume: "2",
      volumeTotal: "10",
      executedVolume: "0",
      displayVolume: "2",
      hiddenVolume: "8",
    });
    expect(engine.depth(1, 5).asks).toEqual([{ price: "100", volume: "2", orders: 1 }]);
    expect(engine.getOrder("i")).toMatchObject({
      volume: "2",
      displayVolume: "2",
      hiddenVolume: "8",
    });
    engine.check();
  });

  test("a filled part shows the next one at the back of its level: it loses time priority", () => {
    const engine = new MatchingEngine();
    engine.apply(ice("i", "5", "2"));
    engine.apply(place({ id: "p", side: "ask", price: "100", volume: "1", userId: "u2" }));
    const taker = engine.apply(
      place({ id: "t", side: "bid", price: "100", volume: "2.5", userId: "u3" }),
    );
    expect(taker.events.map((e) => [e.type, e.payload.orderId ?? e.payload.makerOrderId])).toEqual([
      ["order.updated.v1", "i"],
      ["deal.executed.v1", "i"],
      ["order.rested.v1", "i"],
      ["order.updated.v1", "p"],
      ["order.filled.v1", "t"],
      ["deal.executed.v1", "p"],
    ]);
    expect(taker.events[0]!.payload).toMatchObject({
      volume: "0",
      hiddenVolume: "3",
      fillVolume: "2",
    });
    expect(taker.events[2]!.payload).toMatchObject({
      volume: "2",
      hiddenVolume: "1",
      executedVolume: "2",
    });
    // p, behind it before, is now ahead of it.
    const next = engine.apply(
      place({ id: "t2", side: "bid", price: "100", volume: "0.5", userId: "u3" }),
    );
    expect(next.events[0]!.payload.orderId).toBe("p");
    engine.check();
  });

  test("one taker can take every part, and a FOK counts the hidden volume", () => {
    const engine = new MatchingEngine();
    engine.apply(ice("i", "5", "2"));
    const fok = engine.apply(
      place({ id: "f", side: "bid", price: "100", volume: "5", userId: "u2", timeInForce: "fok" }),
    );
    expect(fok.result.codeName).toBe("filled");
    expect(
      fok.events.filter((e) => e.type === "deal.executed.v1").map((e) => e.payload.volume),
    ).toEqual(["2", "2", "1"]);
    expect(engine.restingOrderCount()).toBe(0);
    engine.check();
  });

  test("a cancel, an expiry or self-trade prevention takes the hidden part too", () => {
    const engine = new MatchingEngine();
    engine.apply(ice("i", "10", "3"));
    engine.apply(place({ id: "t", side: "bid", price: "100", volume: "1", userId: "u2" }));
    const cancelled = engine.apply(cancel("i"));
    expect(cancelled.events[0]!.payload).toMatchObject({ volume: "9", executedVolume: "1" });
    expect(cancelled.result).toMatchObject({ remainingVolume: "9", executedVolume: "1" });
    engine.apply(ice("j", "10", "3"));
    const stp = engine.apply(
      place({ id: "s", side: "bid", price: "100", volume: "1", stp: "cancel-maker" }),
    );
    expect(stp.events[0]!.payload).toMatchObject({ orderId: "j", reason: "stp", volume: "10" });
    engine.check();
  });

  test("an amend may only lower its volume: off the hidden part first, priority kept", () => {
    const engine = new MatchingEngine();
    engine.apply(ice("i", "10", "3"));
    const lower = engine.apply(amend("i", { volume: "5" }));
    expect(lower.result.code).toBe(0);
    expect(lower.events[0]!.payload).toMatchObject({
      priorityKept: true,
      before: { volume: "3", hiddenVolume: "7", volumeTotal: "10" },
      after: { volume: "3", hiddenVolume: "2", volumeTotal: "5" },
    });
    const into = engine.apply(amend("i", { volume: "2" }));
    expect(into.events[0]!.payload).toMatchObject({ after: { volume: "2", hiddenVolume: "0" } });
    expect(engine.depth(1, 1).asks[0]!.volume).toBe("2");
    for (const change of [{ volume: "20" }, { price: "101" }]) {
      expect(engine.apply(amend("i", change)).result.codeName).toBe("unsupported-combination");
    }
    engine.check();
  });

  test("refuses a display not below the volume, on another kind, or zero", () => {
    const engine = new MatchingEngine();
    const codes = [
      ice("a", "2", "2"),
      ice("b", "2", "1", { timeInForce: "ioc" }),
      place({ id: "c", type: "market", price: "0", volume: "2", displayVolume: "1" }),
      ice("d", "2", "0"),
    ].map((c) => engine.apply(c).result.codeName);
    expect(codes).toEqual([
      "unsupported-combination",
      "unsupported-combination",
      "unsupported-combination",
      "non-positive",
    ]);
  });

  test("reloads with its hidden part and the same digest", () => {
    const engine = new MatchingEngine();
    engine.apply(ice("i", "10", "3"));
    engine.apply(place({ id: "t", side: "bid", price: "100", volume: "4", userId: "u2" }));
    const reloaded = new MatchingEngine();
    for (const order of engine.restingOrders()) reloaded.loadRestingOrder(order);
    reloaded.check();
    expect(reloaded.digest()).toBe(engine.digest());
    expect(reloaded.getOrder("i")).toEqual(engine.getOrder("i")!);
    const rest = reloaded.apply(
      place({ id: "t3", side: "bid", price: "100", volume: "6", userId: "u2" }),
    );
    expect(rest.result.codeName).toBe("filled");
  });
});
