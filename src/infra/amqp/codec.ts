/**
 * Decodes command message bodies: plain JSON or superjson-wrapped JSON
 * (`{"json": {...}, "meta": ...}`), as today's producers send them.
 */
import superjson, { type SuperJSONResult } from "superjson";

export type BodyDecode = { ok: true; value: unknown } | { ok: false; reason: string };

export function decodeBody(body: Buffer | Uint8Array): BodyDecode {
  let parsed: unknown;
  try {
    // Decode in place: Buffer.from(buffer) would copy every body first.
    const text = Buffer.isBuffer(body)
      ? body.toString("utf8")
      : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8");
    parsed = JSON.parse(text);
  } catch (error) {
    return { ok: false, reason: `body is not JSON: ${(error as Error).message}` };
  }
  if (isSuperJson(parsed)) {
    try {
      return { ok: true, value: contractDates(superjson.deserialize(parsed)) };
    } catch (error) {
      return { ok: false, reason: `superjson body cannot be decoded: ${(error as Error).message}` };
    }
  }
  return { ok: true, value: parsed };
}

/**
 * superjson restores a Date that a producer put in a contract field, while the contract carries
 * `submittedAt` as an ISO-8601 string and `payload.timestamp` as epoch milliseconds: both are
 * turned back into those forms, or every such command would be refused. An invalid Date is left
 * as it is, for validation to refuse with its reason.
 */
function contractDates(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const envelope = value as { submittedAt?: unknown; payload?: unknown };
  if (isValidDate(envelope.submittedAt)) envelope.submittedAt = envelope.submittedAt.toISOString();
  const payload = envelope.payload as { timestamp?: unknown } | null | undefined;
  if (typeof payload === "object" && payload !== null && isValidDate(payload.timestamp)) {
    payload.timestamp = payload.timestamp.getTime();
  }
  return value;
}

const isValidDate = (value: unknown): value is Date =>
  value instanceof Date && !Number.isNaN(value.getTime());

function isSuperJson(value: unknown): value is SuperJSONResult {
  return (
    typeof value === "object" &&
    value !== null &&
    "json" in value &&
    Object.keys(value).every((key) => key === "json" || key === "meta")
  );
}
