/**
 * Decodes command message bodies: plain JSON or superjson-wrapped JSON
 * (`{"json": {...}, "meta": ...}`), as today's producers send them.
 */
import superjson, { type SuperJSONResult } from "superjson";

export type BodyDecode = { ok: true; value: unknown } | { ok: false; reason: string };

/**
 * Arrays and objects a body may nest: a command nests three deep (superjson's wrapper and its
 * meta add two or three). A deeper body is refused before parsing, since walking a deep tree
 * (superjson does, recursively) costs stack and time.
 */
export const maxBodyNesting = 16;

export function decodeBody(body: Buffer | Uint8Array): BodyDecode {
  const depth = nestingDepth(body, maxBodyNesting);
  if (depth > maxBodyNesting) {
    return { ok: false, reason: `body nests deeper than ${maxBodyNesting} levels; not decoded` };
  }
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

/**
 * How deep a JSON text nests its arrays and objects (brackets inside strings do not count),
 * counting no further than one past `limit`.
 */
export function nestingDepth(bytes: Uint8Array, limit: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (inString) {
      if (byte === 0x5c)
        i++; // a backslash: the next byte is escaped
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x7b || byte === 0x5b) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (byte === 0x7d || byte === 0x5d) {
      depth--;
    }
  }
  return deepest;
}
