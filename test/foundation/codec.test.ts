// Command bodies as producers send them: plain JSON, or wrapped by superjson, which restores
// Dates in the contract's fields; both must decode to the contract's command.

import { describe, expect, test } from "bun:test";
import superjson from "superjson";
import { decodeCommand } from "../../src/domain/index";
import { decodeBody } from "../../src/infra/amqp/codec";
import { place } from "../domain/helpers";

const decodeMessage = (body: unknown) => {
  const decoded = decodeBody(Buffer.from(JSON.stringify(body)));
  if (!decoded.ok) throw new Error(decoded.reason);
  return decodeCommand(decoded.value);
};

describe("decodeBody", () => {
  test("a plain JSON command decodes", () => {
    expect(decodeMessage(place({ id: "o1" })).ok).toBe(true);
  });

  test("a superjson command whose submittedAt and timestamp are Dates decodes to the contract's forms", () => {
    const command = place({ id: "o1" });
    const at = new Date("2024-01-01T00:00:01.500Z");
    const body = superjson.serialize({
      ...command,
      submittedAt: at,
      payload: { ...command.payload, timestamp: at },
    });
    const result = decodeMessage(body);
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.command.submittedAt).toBe("2024-01-01T00:00:01.500Z");
      expect(result.command.payload).toMatchObject({ timestamp: at.getTime() });
    }
  });

  test("an invalid Date is refused with a reason, not turned into text", () => {
    const body = superjson.serialize({ ...place({ id: "o1" }), submittedAt: new Date(Number.NaN) });
    expect(decodeMessage(body)).toMatchObject({ ok: false, code: 200 });
  });

  test("a body that is not JSON is unreadable", () => {
    const decoded = decodeBody(Buffer.from("{nope"));
    expect(decoded.ok).toBe(false);
  });
});
