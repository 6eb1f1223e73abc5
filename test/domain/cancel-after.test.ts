// The dead-man's switch: session.cancel-after arms a deadline from the engine's time; a tick
// past it fires the switch once and cancels every order and stop of the user, 1,000 a tick.

import { describe, expect, test } from "bun:test";
import {
  type CancelAfterCommand,
  decodeCommand,
  MAX_EXPIRIES,
  MatchingEngine,
} from "../../src/domain/index";
import { place, tick } from "./helpers";

const T0 = 1_800_000_000_000;
let n = 0;

function cancelAfter(userId: string, timeoutMs: number, pairId = 1): CancelAfterCommand {
  n++;
  return {
    schemaVersion: 1,
    commandId: `cancel-after-${n}`,
    correlationId: `corr-ca-${n}`,
    type: "session.cancel-after",
    submittedAt: "2027-01-15T08:00:00.000Z",
    pairId,
    partition: 0,
    payload: { userId, timeoutMs },
  };
}

function engineAt(now = T0): MatchingEngine {
  const engine = new MatchingEngine();
  engine.apply(tick(now));
  return engine;
}

describe("session.cancel-after", () => {
  test("arms from the engine's time; a renewal moves the deadline; 0 disarms", () => {
    const engine = engineAt();
    const armed = engine.apply(cancelAfter("u1", 5000));
    expect(armed.result).toMatchObject({ status: "accepted", code: 0, triggerAt: T0 + 5000 });
    expect(armed.changes).toEqual([{ op: "switch-put", userId: "u1", deadline: T0 + 5000 }]);
    engine.apply(tick(T0 + 4000));
    expect(engine.apply(cancelAfter("u1", 5000)).result.triggerAt).toBe(T0 + 9000);
    expect(engine.nextExpiry()).toBe(T0 + 9000);
    engine.check();
    const off = engine.apply(cancelAfter("u1", 0));
    expect(off.result.triggerAt).toBeUndefined();
    expect(off.changes).toEqual([{ op: "switch-remove", userId: "u1" }]);
    expect(engine.nextExpiry()).toBeUndefined();
  });

  test("refuses a timeout outside 0 or 1,000..86,400,000 with bad-timeout", () => {
    const engine = engineAt();
    for (const timeoutMs of [1, 999, 86_400_001]) {
      expect(engine.apply(cancelAfter("u1", timeoutMs)).result.codeName).toBe("bad-timeout");
    }
    expect(engine.apply(cancelAfter("u1", 1000)).result.code).toBe(0);
  });

  test("fires once: session.triggered.v1, then every order and stop of the user, on their pairs", () => {
    const engine = engineAt();
    engine.apply(place({ id: "a", pairId: 1 }));
    engine.apply(place({ id: "b", pairId: 2, side: "ask", price: "200" }));
    engine.apply(place({ id: "s", pairId: 2, type: "stop-limit", stopPrice: "150", price: "150" }));
    engine.apply(place({ id: "other", pairId: 1, userId: "u2", price: "99" }));
    engine.apply(cancelAfter("u1", 1000));
    expect(engine.apply(tick(T0 + 999)).events).toHaveLength(0);
    const fired = engine.apply(tick(T0 + 1000));
    expect(
      fired.events.map((e) => [e.type, e.pairId, e.payload.orderId ?? e.payload.userId]),
    ).toEqual([
      ["session.triggered.v1", 0, "u1"],
      ["order.cancelled.v1", 1, "a"],
      ["order.cancelled.v1", 2, "b"],
      ["order.cancelled.v1", 2, "s"],
    ]);
    expect(fired.events[1]!.payload.reason).toBe("cancel-after");
    expect(fired.result.cancelledOrders).toBe(3);
    expect(engine.restingOrderCount()).toBe(1);
    expect(engine.switches().size + engine.sweeps().size).toBe(0);
    expect(engine.apply(tick(T0 + 5000)).events).toHaveLength(0);
    engine.check();
    engine.checkDigest();
  });

  test(`a sweep past ${MAX_EXPIRIES} orders goes on in the next ticks, and survives a reload`, () => {
    const engine = engineAt();
    for (let i = 0; i < MAX_EXPIRIES + 10; i++) {
      engine.apply(place({ id: `o${i}`, price: String(1 + (i % 50)) }));
    }
    engine.apply(cancelAfter("u1", 1000));
    const first = engine.apply(tick(T0 + 1000));
    expect(first.result.cancelledOrders).toBe(MAX_EXPIRIES);
    expect([...engine.sweeps()]).toEqual([["u1", T0 + 1000]]);
    expect(engine.nextExpiry()).toBe(T0 + 1000);
    const reloaded = new MatchingEngine();
    for (const order of engine.restingOrders()) reloaded.loadRestingOrder(order);
    for (const [userId, deadline] of engine.sweeps()) reloaded.loadSweep(userId, deadline);
    reloaded.loadClock(engine.now());
    expect(reloaded.digest()).toBe(engine.digest());
    const rest = reloaded.apply(tick(T0 + 1001));
    expect(rest.result.cancelledOrders).toBe(10);
    expect(rest.changes.at(-1)).toEqual({ op: "sweep-remove", userId: "u1" });
    expect(reloaded.restingOrderCount()).toBe(0);
    expect(reloaded.nextExpiry()).toBeUndefined();
  });

  test("a reloaded switch past its deadline fires at the first tick", () => {
    const engine = new MatchingEngine();
    engine.apply(place({ id: "a" }));
    engine.loadSwitch("u1", T0);
    engine.check();
    const fired = engine.apply(tick(T0 + 60_000));
    expect(fired.events.map((e) => e.type)).toEqual(["session.triggered.v1", "order.cancelled.v1"]);
    expect(fired.events[0]!.payload).toEqual({ userId: "u1", triggerAt: T0 });
  });

  test("decodes from the wire; clock.tick from the wire is an unknown command type", () => {
    expect(decodeCommand(cancelAfter("u1", 1000)).ok).toBe(true);
    const wireTick = decodeCommand({ ...tick(T0), pairId: 1 });
    expect(wireTick.ok ? "ok" : wireTick.code).toBe(201);
  });
});

test.each([-1000, 1500.5, 999])("timeoutMs %p from the wire is bad-timeout (212)", (timeoutMs) => {
  const decoded = decodeCommand({
    ...cancelAfter("u1", 1000),
    payload: { userId: "u1", timeoutMs },
  });
  const code = decoded.ok ? new MatchingEngine().apply(decoded.command).result.code : decoded.code;
  expect(code).toBe(212);
});
