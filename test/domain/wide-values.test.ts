// Differential property test near and beyond 2^53: scaled values move between the number fast
// path and the bigint fallback (prices, volumes, level totals, quote products), and the engine must
// still agree exactly with the bigint reference book. MATCHD_PROPERTY_SEED=<seed> replays a failure.

import { expect, test } from "bun:test";
import fc from "fast-check";
import {
  type CommandEnvelope,
  MatchingEngine,
  type PlaceOrderPayload,
} from "../../src/domain/index";
import { assertProperty, propertySeed } from "../support/property";
import { ReferenceBook } from "./reference-book";

/** Precision sets: quote decimals below, equal to and above price + amount decimals. */
const configs = [
  { priceDecimals: 6, amountDecimals: 10, quoteDecimals: 8 },
  { priceDecimals: 2, amountDecimals: 8, quoteDecimals: 8 },
  { priceDecimals: 0, amountDecimals: 0, quoteDecimals: 18 },
  { priceDecimals: 18, amountDecimals: 18, quoteDecimals: 18 },
  { priceDecimals: 4, amountDecimals: 4, quoteDecimals: 8 },
] as const;
// Scaled values spread over small numbers, the 2^53 boundary and the 15-integer-digit limit.
const scaledArb = fc.oneof(
  fc.bigInt({ min: 1n, max: 2n ** 20n }),
  fc.bigInt({ min: 2n ** 53n - 64n, max: 2n ** 53n + 64n }),
  fc.bigInt({ min: 1n, max: 2n ** 60n }),
  fc.bigInt({ min: 1n, max: 10n ** 33n - 1n }),
);
const users = ["u1", "u2"];

const opArb = fc.record({
  kind: fc.integer({ min: 0, max: 9 }),
  side: fc.boolean(),
  price: scaledArb,
  volume: scaledArb,
  volumeTotal: scaledArb,
  budget: scaledArb,
  user: fc.integer({ min: 0, max: users.length - 1 }),
  ref: fc.nat(),
});
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

function toCommand(
  op: Op,
  index: number,
  ids: string[],
  config: (typeof configs)[number],
): CommandEnvelope {
  const base = {
    schemaVersion: 1 as const,
    commandId: `c${index}`,
    correlationId: `r${index}`,
    submittedAt: "2024-01-01T00:00:00.000Z",
    pairId: 1,
    partition: 0,
  };
  if (op.kind === 9 && ids.length > 0) {
    const id = ids[op.ref % ids.length]!;
    return { ...base, type: "order.cancel", payload: { id, userId: users[op.user]!, pairId: 1 } };
  }
  const id = `o${index}`;
  ids.push(id);
  const payload: PlaceOrderPayload = {
    id,
    userId: users[op.user]!,
    side: op.side ? "bid" : "ask",
    type: "limit",
    pairId: 1,
    timestamp: 1_000 + index,
    price: decimalOf(op.price, config.priceDecimals),
    volume: decimalOf(op.volume, config.amountDecimals),
    // Usually the same text as volume (the engine reuses the parse), sometimes a larger total.
    volumeTotal:
      op.ref % 3 === 0
        ? decimalOf(larger(op.volume, op.volumeTotal), config.amountDecimals)
        : decimalOf(op.volume, config.amountDecimals),
    quoteVolume: "0",
    ...config,
  };
  if (op.kind === 6) payload.timeInForce = "fok";
  if (op.kind === 7) {
    payload.type = "market";
    payload.price = "0";
  }
  // Quote-sized bids everywhere, rounded quotes included: a quote rounded up (the maker is an
  // ask) leaves less budget than one more unit costs, so a partly filled maker ends the sweep.
  if (op.kind === 8) {
    payload.type = "market";
    payload.side = "bid";
    payload.price = "0";
    payload.volume = "0";
    payload.volumeTotal = "0";
    payload.quoteVolume = decimalOf(op.budget, config.quoteDecimals);
  }
  return { ...base, type: "order.place", payload };
}

test(`engine agrees with the reference book on wide values (seed ${propertySeed})`, () => {
  assertProperty(
    "wide-values property test",
    fc.property(
      fc.integer({ min: 0, max: configs.length - 1 }),
      fc.array(opArb, { minLength: 1, maxLength: 80 }),
      (configIndex, ops) => {
        const engine = new MatchingEngine();
        const reference = new ReferenceBook();
        const ids: string[] = [];
        ops.forEach((op, index) => {
          const command = toCommand(op, index, ids, configs[configIndex]!);
          const actual = engine.apply(command);
          const expected = reference.apply(command);
          expect(JSON.stringify(actual.events)).toBe(JSON.stringify(expected.events));
          expect(actual.result).toEqual(expected.result);
          engine.check();
          expect(engine.digest()).toBe(reference.digest());
        });
        expect(engine.depth(1, 5)).toEqual(depthOf(engine, 5));
      },
    ),
    200,
  );
});

/** Depth recomputed from the resting orders, so level totals are checked against their orders. */
function depthOf(engine: MatchingEngine, levels: number) {
  const sides = { bids: new Map<string, bigint>(), asks: new Map<string, bigint>() };
  const counts = new Map<string, number>();
  let decimals = 0;
  for (const order of engine.restingOrders()) {
    decimals = order.amountDecimals;
    const side = order.side === "bid" ? sides.bids : sides.asks;
    const scaled = toScaled(order.volume, decimals);
    side.set(order.price, (side.get(order.price) ?? 0n) + scaled);
    counts.set(`${order.side}${order.price}`, (counts.get(`${order.side}${order.price}`) ?? 0) + 1);
  }
  const list = (map: Map<string, bigint>, side: string) =>
    [...map].slice(0, levels).map(([price, total]) => ({
      price,
      volume: fromScaled(total, decimals),
      orders: counts.get(`${side}${price}`)!,
    }));
  return { bids: list(sides.bids, "bid"), asks: list(sides.asks, "ask") };
}

function larger(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

/** A scaled value inside the 15-integer-digit limit, as canonical decimal text. */
function decimalOf(value: bigint, decimals: number): string {
  const limited = value % 10n ** BigInt(15 + decimals);
  return fromScaled(limited === 0n ? 1n : limited, decimals);
}

function toScaled(text: string, decimals: number): bigint {
  const [whole, fraction = ""] = text.split(".");
  return BigInt(whole! + fraction.padEnd(decimals, "0"));
}

function fromScaled(value: bigint, decimals: number): string {
  const digits = value.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return fraction === "" ? whole : `${whole}.${fraction}`;
}
