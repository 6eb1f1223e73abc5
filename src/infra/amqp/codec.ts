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
      return { ok: true, value: superjson.deserialize(parsed) };
    } catch (error) {
      return { ok: false, reason: `superjson body cannot be decoded: ${(error as Error).message}` };
    }
  }
  return { ok: true, value: parsed };
}

function isSuperJson(value: unknown): value is SuperJSONResult {
  return (
    typeof value === "object" &&
    value !== null &&
    "json" in value &&
    Object.keys(value).every((key) => key === "json" || key === "meta")
  );
}
