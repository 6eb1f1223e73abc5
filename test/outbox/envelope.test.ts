/**
 * Pure pieces of the outbox: envelope decoding (what is dead-lettered and why), which event
 * ends its command's commit, and the retry backoff's bounds.
 */
import { describe, expect, test } from "bun:test";
import { backoffCapMs, backoffDelayMs } from "../../src/infra/backoff";
import { decodeEntry, entryTimeMs, markCommandEnds } from "../../src/outbox/envelope";

const good = JSON.stringify({
  schemaVersion: 1,
  eventId: "c1:0:order.rested.v1",
  type: "order.rested.v1",
  payload: {},
});

describe("decodeEntry", () => {
  const cases: [string, string[], string | null][] = [
    ["a valid envelope", ["event", good], null],
    ["the event field after others", ["trace", "x", "event", good], null],
    ["no event field", ["other", good], "no `event` field"],
    ["bad JSON", ["event", "{oops"], "not JSON"],
    ["a JSON array", ["event", "[1]"], "not a JSON object"],
    ["no eventId", ["event", JSON.stringify({ type: "order.rested.v1" })], "no eventId"],
    [
      "an empty eventId",
      ["event", JSON.stringify({ eventId: "", type: "order.rested.v1" })],
      "no eventId",
    ],
    [
      "an unknown type",
      ["event", JSON.stringify({ eventId: "e", type: "order.exploded.v1" })],
      "unknown event type",
    ],
    [
      "an eventId of 255 bytes (85 three-byte characters)",
      ["event", JSON.stringify({ eventId: "€".repeat(85), type: "order.rested.v1" })],
      null,
    ],
    [
      "an eventId over 255 bytes, too long for an AMQP message id",
      ["event", JSON.stringify({ eventId: "€".repeat(86), type: "order.rested.v1" })],
      "258 bytes in UTF-8; a message id holds at most 255",
    ],
    [
      "a prototype key as type",
      ["event", JSON.stringify({ eventId: "e", type: "toString" })],
      "unknown event type",
    ],
  ];
  for (const [name, fields, reason] of cases) {
    test(name, () => {
      const decoded = decodeEntry({ id: "1-0", fields });
      if (reason === null) {
        expect(decoded.ok).toBe(true);
      } else {
        expect(decoded.ok).toBe(false);
        if (!decoded.ok) expect(decoded.reason).toContain(reason);
      }
    });
  }

  test("routes by type and keeps the raw bytes", () => {
    const decoded = decodeEntry({ id: "1700000000000-3", fields: ["event", good] });
    if (!decoded.ok) throw new Error(decoded.reason);
    expect(decoded.event.exchange).toBe("messages:order:create");
    expect(decoded.event.body.toString()).toBe(good);
    expect(decoded.event.entryId).toBe("1700000000000-3");
    expect(entryTimeMs(decoded.event.entryId)).toBe(1_700_000_000_000);
    expect(decoded.event.sequence).toBeUndefined();
  });

  test("carries the entry's sequence number, in either field order", () => {
    for (const fields of [
      ["event", good, "seq", "42"],
      ["seq", "42", "event", good],
    ]) {
      const decoded = decodeEntry({ id: "1-0", fields });
      if (!decoded.ok) throw new Error(decoded.reason);
      expect(decoded.event.sequence).toBe("42");
    }
  });
});

describe("backoffDelayMs", () => {
  test("doubles from 100 ms with jitter between half and all of the ceiling", () => {
    expect(backoffDelayMs(0, {}, () => 0)).toBe(50);
    expect(backoffDelayMs(0, {}, () => 1)).toBe(100);
    expect(backoffDelayMs(3, {}, () => 1)).toBe(800);
  });
  test("takes its own base and cap (the conductor's reload pacing)", () => {
    const shape = { baseMs: 50, capMs: 5000 };
    expect(backoffDelayMs(0, shape, () => 1)).toBe(50);
    expect(backoffDelayMs(10, shape, () => 1)).toBe(5000);
    expect(backoffDelayMs(10, shape, () => 0)).toBe(2500);
  });
  test("is capped at 30 s however many attempts failed", () => {
    for (const attempt of [9, 10, 50, 10_000]) {
      expect(backoffDelayMs(attempt, {}, () => 1)).toBe(backoffCapMs);
      expect(backoffDelayMs(attempt, {}, () => 0)).toBe(backoffCapMs / 2);
    }
  });
});

describe("markCommandEnds", () => {
  const entry = (id: string, commandId: string | undefined) =>
    decodeEntry({
      id,
      fields: ["event", JSON.stringify({ eventId: `e${id}`, type: "order.rested.v1", commandId })],
    });
  const marks = (complete: boolean, ...commands: (string | undefined | null)[]) =>
    markCommandEnds(
      commands.map((c, i) =>
        c === null ? decodeEntry({ id: `${i}-0`, fields: [] }) : entry(`${i}-0`, c),
      ),
      complete,
    ).map((d) => (d.ok ? d.event.commandLast : "dead"));

  test("an event followed by another command's ends its command", () => {
    expect(marks(false, "a", "a", "b", "c", "c")).toEqual([false, true, true, false, false]);
  });
  test("the batch's last event ends its command only when the read took all there was", () => {
    expect(marks(true, "a", "b", "b")).toEqual([true, false, true]);
  });
  test("nothing is marked before an undecodable entry or on an event without a command", () => {
    expect(marks(true, "a", null, "b", undefined)).toEqual([false, "dead", false, false]);
  });
});
