// decodeCommand: valid envelopes decode, bad ones come back as values with a code and whatever
// identifying fields could be salvaged; nothing throws.

import { describe, expect, test } from "bun:test";
import { decodeCommand, ResultCodes } from "../../src/domain/index";
import { cancel, place } from "./helpers";

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
    expect(result.ok && result.command.payload.userId).toBe("42");
  });

  const good = place({ id: "o1" });
  test.each([
    ["not an object", "hello", ResultCodes.badEnvelope],
    ["null", null, ResultCodes.badEnvelope],
    ["wrong schemaVersion", { ...good, schemaVersion: 2 }, ResultCodes.badEnvelope],
    ["unknown type", { ...good, type: "order.amend" }, ResultCodes.unknownCommandType],
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
