// Differential property test: random command streams go to the engine and to the naive reference
// book; after every step events (as JSON), results and digests must agree and check() must pass.
// A failure prints the seed; MATCHD_PROPERTY_SEED=<seed> replays it.

import { expect, test } from "bun:test";
import fc from "fast-check";
import {
  type CommandEnvelope,
  MatchingEngine,
  type PlaceOrderPayload,
  type RestingOrder,
} from "../../src/domain/index";
import { assertProperty, propertySeed } from "../support/property";
import { ReferenceBook } from "./reference-book";

const prices = ["9.5", "9.8", "10", "10", "10.1", "10.3", "10.5"];
const volumes = ["1", "2", "0.33", "0.5", "3", "1.25", "0.01", "5"];
const badDecimals = [
  "abc",
  "1e5",
  "-1",
  "",
  "1.",
  ".5",
  " 1",
  "10.123",
  "0",
  "9999999999999999",
  // Where the first problem decides the reason: a sign before an exponent or a point, two
  // signs, a second point before an exponent, a point first before an exponent.
  "-1e5",
  "-.5",
  "-1.",
  "--1",
  "1.2.3e",
  ".e5",
  "1.2.",
];
const users = ["u1", "u2", "u3"];
const stps = ["none", "none", "cancel-taker", "cancel-maker", "cancel-both"] as const;

const opArb = fc.record({
  kind: fc.integer({ min: 0, max: 22 }),
  side: fc.boolean(),
  price: fc.integer({ min: 0, max: prices.length - 1 }),
  volume: fc.integer({ min: 0, max: volumes.length - 1 }),
  user: fc.integer({ min: 0, max: users.length - 1 }),
  stp: fc.integer({ min: 0, max: stps.length - 1 }),
  ref: fc.nat(),
  bad: fc.integer({ min: 0, max: badDecimals.length - 1 }),
  pair: fc.integer({ min: 1, max: 3 }),
});

/**
 * Each pair's precisions: pairs 1 and 2 round quotes (two quote decimals for one price and two
 * amount decimals), pair 3 quotes exactly (six quote decimals for two and three).
 */
const precisions = (pairId: number) =>
  pairId === 3
    ? { priceDecimals: 2, amountDecimals: 3, quoteDecimals: 6 }
    : { priceDecimals: 1, amountDecimals: 2, quoteDecimals: 2 };
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

/** Turns abstract ops into concrete commands; `ids` collects every order id used so far. */
function toCommand(
  op: Op,
  index: number,
  ids: string[],
): { command: CommandEnvelope; alreadyAccepted: boolean } {
  const commandId = `c${index}`;
  const base = {
    schemaVersion: 1 as const,
    commandId,
    correlationId: `r${index}`,
    submittedAt: `2024-01-01T00:00:${String(index % 60).padStart(2, "0")}.000Z`,
    pairId: op.pair,
    partition: 0,
  };
  const refId = ids.length > 0 ? ids[op.ref % ids.length]! : "missing";
  if (op.kind === 17 || op.kind === 18) {
    const userId = op.kind === 18 ? users[op.user]! : "u1";
    return {
      command: { ...base, type: "order.cancel", payload: { id: refId, userId, pairId: op.pair } },
      // The shell's accepted-order marker, also for orders the engine no longer remembers.
      alreadyAccepted: op.side,
    };
  }
  const id = op.kind === 16 ? refId : `o${index}`;
  ids.push(id);
  const payload: PlaceOrderPayload = {
    id,
    userId: users[op.user]!,
    side: op.side ? "bid" : "ask",
    type: "limit",
    pairId: op.pair,
    timestamp: 1_000 + index,
    price: prices[op.price]!,
    volume: volumes[op.volume]!,
    volumeTotal: volumes[op.volume]!,
    quoteVolume: "0",
    ...precisions(op.pair),
    stp: stps[op.stp]!,
  };
  switch (op.kind) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
      break; // plain GTC limit
    case 6:
      payload.timeInForce = "ioc";
      break;
    case 7:
      payload.timeInForce = "fok";
      break;
    case 8:
      payload.postOnly = true;
      break;
    case 9:
    case 10:
      payload.type = "market";
      payload.price = "0";
      break;
    case 11:
      payload.type = "market";
      payload.side = "bid";
      payload.price = "0";
      // One in five also names a base volume: refused by both books (two sizes at once).
      if (op.bad % 5 !== 0) {
        payload.volume = "0";
        payload.volumeTotal = "0";
      }
      payload.quoteVolume = ["10", "25.37", "0.07", "100"][op.volume % 4]!;
      break;
    case 12:
      payload.price = badDecimals[op.bad]!;
      break;
    case 13:
      payload.volume = badDecimals[op.bad]!;
      break;
    case 14:
      payload.amountDecimals = 3;
      break; // precision differs from the pair's resting orders
    case 15:
      payload.type = "market";
      payload.timeInForce = "fok";
      payload.price = "0";
      break;
    case 16:
      break; // re-uses an earlier id: a duplicate when that order was accepted
    case 20:
      // Post-only with a market order or a time in force: refused or never taking.
      payload.postOnly = true;
      if (op.side) {
        payload.type = "market";
        payload.price = "0";
      } else payload.timeInForce = op.bad % 2 === 0 ? "ioc" : "fok";
      break;
    case 21:
      // A quote-sized market bid with a time in force (FOK is refused as unsupported).
      payload.type = "market";
      payload.side = "bid";
      payload.price = "0";
      payload.volume = "0";
      payload.volumeTotal = "0";
      payload.quoteVolume = ["10", "2.5", "0.1", "100"][op.volume % 4]!;
      payload.timeInForce = op.bad % 2 === 0 ? "ioc" : "fok";
      break;
    case 22:
      // Already executed in part before this command (volume below volumeTotal).
      payload.volumeTotal = "9.99";
      break;
    case 19:
      return { command: { ...base, type: "order.place", payload }, alreadyAccepted: true };
  }
  return { command: { ...base, type: "order.place", payload }, alreadyAccepted: false };
}

test(`engine agrees with the reference book (seed ${propertySeed})`, () => {
  assertProperty(
    "property test",
    fc.property(fc.array(opArb, { minLength: 1, maxLength: 150, size: "max" }), (ops) => {
      const engine = new MatchingEngine();
      const reference = new ReferenceBook();
      const ids: string[] = [];
      // The book as the outcomes' changes describe it, which the conductor writes.
      const mirror = new Map<string, string>();
      ops.forEach((op, index) => {
        const { command, alreadyAccepted } = toCommand(op, index, ids);
        const actual = engine.apply(command, alreadyAccepted);
        const expected = reference.apply(command, alreadyAccepted);
        expect(JSON.stringify(actual.events)).toBe(JSON.stringify(expected.events));
        expect(actual.result).toEqual(expected.result);
        engine.check();
        engine.checkDigest();
        expect(engine.digest()).toBe(reference.digest());
        expect(engine.restingOrderCount()).toBe(reference.restingCount());
        for (const change of actual.changes) {
          if (change.op === "put") mirror.set(change.order.id, JSON.stringify(change.order));
          else expect(mirror.delete(change.order.id)).toBe(true);
        }
        const resting = [...engine.restingOrders()];
        expect(resting.length).toBe(mirror.size);
        for (const order of resting) expect(mirror.get(order.id)).toBe(JSON.stringify(order));
      });
    }),
    300,
  );
});

/**
 * The conductor's reload, at the domain's level: at random points the engine is replaced by a
 * fresh one loaded from the resting orders its changes described (in reverse, so priority
 * must come from the sequence numbers, not the load order), and it forgets every finished id,
 * so, as the conductor does with its stored markers, each command says whether its order id
 * was accepted before. Events, results and digests must still agree with the reference book,
 * which never reloads.
 */
test(`an engine reloaded from its changes agrees with the reference book (seed ${propertySeed})`, () => {
  assertProperty(
    "reload property test",
    fc.property(
      fc.array(opArb, { minLength: 1, maxLength: 150, size: "max" }),
      fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
      (ops, reloadPoints) => {
        let engine = new MatchingEngine();
        const reference = new ReferenceBook();
        const ids: string[] = [];
        const accepted = new Set<string>();
        const mirror = new Map<string, RestingOrder>();
        const reloadAt = new Set(reloadPoints.map((point) => point % ops.length));
        let reloads = 0;
        ops.forEach((op, index) => {
          if (reloadAt.has(index)) {
            engine = new MatchingEngine();
            for (const order of [...mirror.values()].reverse()) engine.loadRestingOrder(order);
            engine.check();
            engine.checkDigest();
            expect(engine.digest()).toBe(reference.digest());
            reloads++;
          }
          const { command, alreadyAccepted } = toCommand(op, index, ids);
          const marker = alreadyAccepted || accepted.has(command.payload.id);
          const actual = engine.apply(command, marker);
          const expected = reference.apply(command, marker);
          expect(JSON.stringify(actual.events)).toBe(JSON.stringify(expected.events));
          expect(actual.result).toEqual(expected.result);
          engine.check();
          engine.checkDigest();
          expect(engine.digest()).toBe(reference.digest());
          if (actual.acceptedOrderId !== undefined) accepted.add(actual.acceptedOrderId);
          for (const change of actual.changes) {
            if (change.op === "put") mirror.set(change.order.id, change.order);
            else expect(mirror.delete(change.order.id)).toBe(true);
          }
        });
        expect(reloads).toBe(reloadAt.size);
      },
    ),
    200,
  );
});
