// decodeCommand: valid envelopes decode, bad ones come back as values with a code and whatever
// identifying fields could be salvaged; nothing throws.

import { describe, expect, test } from "bun:test";
import { decodeCommand, ResultCodes } from "../../src/domain/index";
import { cancel, place } from "./helpers";

/** An envelope of `type` around `payload`, as place() builds one, for the newer commands. */
function envelope(type: string, payload: Record<string, unknown>) {
  const { payload: _, ...base } = place({ id: "o1" });
  return { ...base, type, payload };
}

describe("decodeCommand", () => {
  test("a contract place command with extra payload fields decodes", () => {
    const command = place({ id: "o1" });
    const result = decodeCommand({ ...command, payload: { ...command.payload, extra: "kept" } });
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.command.type).toBe("order.place");
  });

  test("a cancel decodes and a numeric userId becomes text", () => {
    const command = cancel("o1");
    const result = decodeCommand({ ...command, payload: { ...command.payload, userId: 42 } });
    expect(
      result.ok && result.command.type === "order.cancel" && result.command.payload.userId,
    ).toBe("42");
  });

  const good = place({ id: "o1" });
  test.each([
    ["not an object", "hello", ResultCodes.badEnvelope],
    ["null", null, ResultCodes.badEnvelope],
    ["wrong schemaVersion", { ...good, schemaVersion: 2 }, ResultCodes.badEnvelope],
    ["unknown type", { ...good, type: "order.replace" }, ResultCodes.unknownCommandType],
    ["missing payload", { ...good, payload: undefined }, ResultCodes.badEnvelope],
    ["bad side", { ...good, payload: { ...good.payload, side: "buy" } }, ResultCodes.badEnvelope],
    [
      "numeric price",
      { ...good, payload: { ...good.payload, price: 100 } },
      ResultCodes.badEnvelope,
    ],
    ["pairId zero", { ...good, pairId: 0 }, ResultCodes.badEnvelope],
    [
      "decimals out of range",
      { ...good, payload: { ...good.payload, amountDecimals: 30 } },
      ResultCodes.badEnvelope,
    ],
  ])("%s is refused without throwing", (_name, value, code) => {
    const result = decodeCommand(value);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.code).toBe(code);
      expect(result.reason.length).toBeGreaterThan(0);
    }
  });

  test("a refused command keeps its identifying fields for the reject event", () => {
    const result = decodeCommand({ ...good, payload: { ...good.payload, side: "buy" } });
    expect(result).toMatchObject({
      ok: false,
      commandId: good.commandId,
      pairId: 1,
      orderId: "o1",
    });
  });

  test("submittedAt must be an ISO-8601 date and time: it becomes every event's occurredAt", () => {
    for (const submittedAt of [
      "2024-01-01T00:00:00.000Z",
      "2024-01-01T00:00:00Z",
      "2024-01-01T01:00:00.123456+01:00",
      "2024-01-01T00:00-0500",
      "2024-01-01t00:00:00z",
      // Producers in other languages: no offset, an hour-only offset, a space, a comma, a leap second.
      "2024-01-01T00:00:00",
      "2024-01-01T00:00:00+00",
      "2024-01-01 00:00:00+00:00",
      "2024-01-01T00:00:00,5Z",
      "2016-12-31T23:59:60Z",
    ]) {
      expect(decodeCommand({ ...good, submittedAt }).ok).toBe(true);
    }
    for (const submittedAt of [
      "not a date",
      "2024-01-01",
      "2024-01-01T24:00:00Z",
      "2024-01-01T00:00:00Zjunk",
      "2024-02-30X",
      "2024-13-01T00:00:00Z",
      1_704_067_200_000,
    ]) {
      const result = decodeCommand({ ...good, submittedAt });
      expect(result).toMatchObject({ ok: false, code: ResultCodes.badEnvelope });
      // The refusal keeps the command id but not the bad timestamp (its event's occurredAt).
      expect(result).toMatchObject({ commandId: good.commandId });
      expect(result).not.toHaveProperty("submittedAt");
    }
  });

  test("a command id too long to be valid is not cut to fit (it would share a stored result)", () => {
    const a = decodeCommand({ ...good, commandId: `${"x".repeat(200)}-a` });
    const b = decodeCommand({ ...good, commandId: `${"x".repeat(200)}-b` });
    expect(a.ok).toBe(false);
    expect(b.ok).toBe(false);
    expect(a).not.toHaveProperty("commandId");
    expect(b).not.toHaveProperty("commandId");
  });

  test("a command id may take at most 200 bytes in UTF-8: its event ids become AMQP message ids (255 bytes at most)", () => {
    // 66 "€" take 198 bytes; 67 take 201, in 67 UTF-16 units (under the 200-unit limit).
    expect(decodeCommand({ ...good, commandId: "€".repeat(66) }).ok).toBe(true);
    const long = decodeCommand({ ...good, commandId: "€".repeat(67) });
    expect(long).toMatchObject({ ok: false, code: ResultCodes.badEnvelope });
    expect(long).not.toHaveProperty("commandId");
    expect((long as { reason: string }).reason).toContain("200 bytes in UTF-8");
    // Four bytes for a character outside the basic plane (two UTF-16 units).
    expect(decodeCommand({ ...good, commandId: "😀".repeat(50) }).ok).toBe(true);
    expect(decodeCommand({ ...good, commandId: `${"😀".repeat(50)}x` }).ok).toBe(false);
  });
});

describe("decodeCommand: stop orders, amend, cancel-all and pair commands", () => {
  test("a stop-limit and a stop-market place decode with their stopPrice", () => {
    for (const type of ["stop-limit", "stop-market"] as const) {
      const result = decodeCommand(place({ id: "s1", type, stopPrice: "105" }));
      expect(result.ok).toBe(true);
      if (result.ok && result.command.type === "order.place") {
        expect(result.command.payload).toMatchObject({ type, stopPrice: "105" });
      }
    }
  });

  test("a stop without a stopPrice, or with a number, is a bad envelope naming the field", () => {
    for (const stopPrice of [undefined, 105]) {
      const result = decodeCommand(place({ id: "s1", type: "stop-limit", stopPrice } as never));
      expect(result).toMatchObject({ ok: false, code: ResultCodes.badEnvelope, orderId: "s1" });
      expect((result as { reason: string }).reason).toContain("payload.stopPrice");
    }
  });

  test("a limit or market order ignores stopPrice of any type, as it ignored extra fields", () => {
    for (const type of ["limit", "market"] as const) {
      const result = decodeCommand(place({ id: "o1", type, stopPrice: 5 } as never));
      expect(result.ok).toBe(true);
    }
  });

  test("an amend decodes with any of volume, price and stopPrice, or none (the engine's check)", () => {
    for (const fields of [{ volume: "0.5" }, { price: "101", stopPrice: "99" }, {}]) {
      const result = decodeCommand(
        envelope("order.amend", { id: "o1", userId: 7, pairId: 1, ...fields }),
      );
      expect(result.ok).toBe(true);
      if (result.ok && result.command.type === "order.amend") {
        expect(result.command.payload).toEqual({ id: "o1", userId: "7", pairId: 1, ...fields });
      }
    }
  });

  test.each([
    ["a numeric volume", { id: "o1", userId: "u1", pairId: 1, volume: 1 }],
    ["no id", { userId: "u1", pairId: 1, price: "1" }],
    ["no pairId", { id: "o1", userId: "u1", price: "1" }],
  ])("an amend with %s is a bad envelope", (_name, payload) => {
    const result = decodeCommand(envelope("order.amend", payload));
    expect(result).toMatchObject({ ok: false, code: ResultCodes.badEnvelope });
  });

  test("a cancel-all decodes with or without a pairId", () => {
    for (const payload of [{ userId: "u1" }, { userId: "u1", pairId: 1 }]) {
      const result = decodeCommand(envelope("order.cancel-all", payload));
      expect(result.ok).toBe(true);
      if (result.ok) expect(result.command.payload).toEqual(payload);
    }
    const noUser = decodeCommand(envelope("order.cancel-all", { pairId: 1 }));
    expect(noUser).toMatchObject({ ok: false, code: ResultCodes.badEnvelope });
  });

  test("pair.halt and pair.resume need a reason of 1 to 200 characters", () => {
    for (const type of ["pair.halt", "pair.resume"]) {
      const ok = decodeCommand(envelope(type, { pairId: 1, reason: "maintenance" }));
      expect(ok.ok && String(ok.command.type)).toBe(type);
      expect(decodeCommand(envelope(type, { pairId: 1, reason: "x".repeat(200) })).ok).toBe(true);
      for (const reason of [undefined, "", "x".repeat(201), 5]) {
        const bad = decodeCommand(envelope(type, { pairId: 1, reason }));
        expect(bad).toMatchObject({ ok: false, code: ResultCodes.badEnvelope });
      }
    }
  });

  test("only names outside the contract are unknown command types", () => {
    for (const type of ["order.amend", "order.cancel-all", "pair.halt", "pair.resume"]) {
      // Known types with a bad payload: a bad envelope, not an unknown type.
      expect(decodeCommand(envelope(type, {}))).toMatchObject({ code: ResultCodes.badEnvelope });
    }
    for (const type of ["pair.delete", "order.cancelAll", "ORDER.PLACE", 7]) {
      expect(decodeCommand(envelope(type as string, {}))).toMatchObject({
        code: ResultCodes.unknownCommandType,
      });
    }
  });
});
