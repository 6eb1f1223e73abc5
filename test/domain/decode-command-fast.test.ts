// The fast command check against the zod schema it shortcuts: on mutated commands of every
// kind, decodeCommand (fast path first) must give exactly what the schema alone gives.
// A failure prints the seed; MATCHD_PROPERTY_SEED=<seed> replays it.

import { expect, test } from "bun:test";
import fc from "fast-check";
import { decodeWithSchema } from "../../src/domain/decode-command";
import { decodeValidCommand } from "../../src/domain/decode-command-fast";
import { decodeCommand } from "../../src/domain/index";
import { assertProperty, propertySeed } from "../support/property";
import { cancel, place } from "./helpers";

/** Values that sit on or across the schema's edges. */
const oddValue = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.constantFrom(
      undefined,
      null,
      0,
      -1,
      1,
      18,
      19,
      1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      2 ** 53,
      "",
      "x".repeat(200),
      "x".repeat(201),
      // 66 and 67 three-byte characters: 198 and 201 bytes, both under 200 units.
      "€".repeat(66),
      "€".repeat(67),
      "x".repeat(64),
      "x".repeat(65),
      // submittedAt's edges: ISO-8601 with an offset, or not.
      "2024-01-01T00:00:00.000Z",
      "2024-01-01T00:00+05:30",
      "2024-13-01T00:00:00Z",
      "2024-01-01 00:00:00Z",
      "2024-01-01T00:00:00",
      `2024-01-01T00:00:00.${"0".repeat(9)}Z`,
      `2024-01-01T00:00:00.${"0".repeat(10)}Z`,
      "bid",
      "ask",
      "buy",
      "limit",
      "market",
      "gtc",
      "ioc",
      "fok",
      "none",
      "cancel-both",
      "order.place",
      "order.cancel",
      true,
      false,
      [],
      {},
    ),
  },
  { weight: 1, arbitrary: fc.string() },
  { weight: 1, arbitrary: fc.integer() },
);

const envelopeKeys = [
  "schemaVersion",
  "commandId",
  "correlationId",
  "submittedAt",
  "pairId",
  "partition",
  "type",
  "payload",
  "extra",
];
const payloadKeys = [
  "id",
  "userId",
  "side",
  "type",
  "pairId",
  "timestamp",
  "price",
  "volume",
  "volumeTotal",
  "quoteVolume",
  "priceDecimals",
  "amountDecimals",
  "quoteDecimals",
  "role",
  "timeInForce",
  "postOnly",
  "stp",
  "extra",
];

const mutation = fc.record({
  base: fc.constantFrom("place", "cancel"),
  envelope: fc.array(fc.tuple(fc.constantFrom(...envelopeKeys), oddValue, fc.boolean()), {
    maxLength: 1,
  }),
  payload: fc.array(fc.tuple(fc.constantFrom(...payloadKeys), oddValue, fc.boolean()), {
    maxLength: 2,
  }),
});

test(`the fast check agrees with the zod schema (seed ${propertySeed})`, () => {
  assertProperty(
    "decode property test",
    fc.property(mutation, ({ base, envelope, payload }) => {
      const command: Record<string, unknown> =
        base === "place" ? { ...place({ id: "o1" }) } : { ...cancel("o1") };
      const body = { ...(command.payload as Record<string, unknown>) };
      for (const [key, value, remove] of payload) {
        if (remove) delete body[key];
        else body[key] = value;
      }
      command.payload = body;
      for (const [key, value, remove] of envelope) {
        if (remove) delete command[key];
        else command[key] = value;
      }
      const reference = decodeWithSchema(command);
      const fast = decodeValidCommand(command);
      if (fast !== undefined) {
        expect(reference.ok).toBe(true);
        if (reference.ok) expect(fast).toEqual(reference.command);
      }
      expect(decodeCommand(command)).toEqual(reference);
    }),
    5000,
  );
});

test("the fast check takes the producers' plain commands", () => {
  expect(decodeValidCommand(place({ id: "o1" }))).toBeDefined();
  expect(decodeValidCommand(cancel("o1"))).toBeDefined();
  expect(
    decodeValidCommand(place({ id: "o1", timeInForce: "ioc", postOnly: false })),
  ).toBeDefined();
});
