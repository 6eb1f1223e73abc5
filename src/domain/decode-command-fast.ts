// A hand-written check for the common, fully valid command: the same rules as the zod
// schema in decode-command.ts, never looser, so anything it accepts zod accepts too. It
// exists for cost: zod was about a sixth of the conductor's CPU per command. Anything it
// does not accept (including valid rarities such as a numeric userId) goes to zod, which
// decides and words the reasons.

import type { CommandEnvelope } from "./types";

type Fields = Record<string, unknown>;

const sides = new Set(["bid", "ask"]);
const kinds = new Set(["limit", "market"]);
const timesInForce = new Set(["gtc", "ioc", "fok", "gtd"]);
const stpModes = new Set(["none", "cancel-taker", "cancel-maker", "cancel-both"]);

function isFields(value: unknown): value is Fields {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** zod's idText: a string of 1 to 200 UTF-16 units. */
function isIdText(value: unknown): value is string {
  return typeof value === "string" && value.length >= 1 && value.length <= 200;
}

/**
 * The most UTF-8 bytes a command id may take. Its events' ids (`<commandId>:<ordinal>:<type>`,
 * at most ~30 bytes more) become AMQP message ids, which are short strings of at most 255
 * bytes: a longer id could be committed but never published.
 */
export const MAX_COMMAND_ID_BYTES = 200;

/** Bytes of `text` in UTF-8 (a lone surrogate counts 3, as TextEncoder writes U+FFFD). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/** A command id: 1 to 200 UTF-16 units that take at most MAX_COMMAND_ID_BYTES in UTF-8. */
export function isCommandIdText(value: unknown): value is string {
  // Up to 66 units cannot exceed 200 bytes (3 bytes a unit at most): no need to count.
  return isIdText(value) && (value.length <= 66 || utf8Length(value) <= MAX_COMMAND_ID_BYTES);
}

/**
 * An ISO-8601 date and time, as `Date.prototype.toISOString` writes it and as the contract's
 * `submittedAt` is: it becomes every event's `occurredAt`, so a consumer must be able to read
 * it. The extended calendar form: a `T` (RFC 3339's `t` or space too), seconds
 * (a leap second too) and their fraction (`.` or `,`) optional, and the offset optional
 * (`Z`, `±hh`, `±hh:mm` or `±hhmm`), as producers in several languages write it; the basic
 * form without separators is not accepted.
 */
const ISO_TIMESTAMP =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[T ]([01]\d|2[0-3]):[0-5]\d(:([0-5]\d|60)([.,]\d{1,9})?)?(Z|[+-]([01]\d|2[0-3])(:?[0-5]\d)?)?$/i;

/** The contract's submittedAt: an ISO-8601 timestamp (at most 64 characters). */
export function isIsoTimestamp(value: unknown): value is string {
  return typeof value === "string" && value.length <= 64 && ISO_TIMESTAMP.test(value);
}

function isPositiveInt(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

function isNonNegativeInt(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isDecimals(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= 18;
}

function isOptional(value: unknown, allowed: Set<string>): boolean {
  return value === undefined || (typeof value === "string" && allowed.has(value));
}

function isPlacePayload(p: Fields): boolean {
  return (
    isIdText(p.id) &&
    isIdText(p.userId) &&
    typeof p.side === "string" &&
    sides.has(p.side) &&
    typeof p.type === "string" &&
    kinds.has(p.type) &&
    isPositiveInt(p.pairId) &&
    isNonNegativeInt(p.timestamp) &&
    typeof p.price === "string" &&
    typeof p.volume === "string" &&
    typeof p.volumeTotal === "string" &&
    typeof p.quoteVolume === "string" &&
    isDecimals(p.priceDecimals) &&
    isDecimals(p.amountDecimals) &&
    isDecimals(p.quoteDecimals) &&
    (p.role === undefined || typeof p.role === "string") &&
    isOptional(p.timeInForce, timesInForce) &&
    (p.expireAt === undefined || isNonNegativeInt(p.expireAt)) &&
    (p.displayVolume === undefined || typeof p.displayVolume === "string") &&
    (p.postOnly === undefined || typeof p.postOnly === "boolean") &&
    isOptional(p.stp, stpModes)
  );
}

function isCancelPayload(p: Fields): boolean {
  return isIdText(p.id) && isIdText(p.userId) && isPositiveInt(p.pairId);
}

/**
 * The decoded command when `value` is plainly valid, else undefined (ask zod). Like zod's
 * output, the envelope keeps only its known fields and the payload keeps every field.
 */
export function decodeValidCommand(value: unknown): CommandEnvelope | undefined {
  if (!isFields(value)) return undefined;
  const v = value;
  if (
    v.schemaVersion !== 1 ||
    !isCommandIdText(v.commandId) ||
    typeof v.correlationId !== "string" ||
    v.correlationId.length > 200 ||
    !isIsoTimestamp(v.submittedAt) ||
    !isPositiveInt(v.pairId) ||
    !isNonNegativeInt(v.partition) ||
    !isFields(v.payload)
  ) {
    return undefined;
  }
  const payload = v.payload;
  if (v.type === "order.place") {
    if (!isPlacePayload(payload)) return undefined;
  } else if (v.type === "order.cancel") {
    if (!isCancelPayload(payload)) return undefined;
  } else {
    return undefined;
  }
  // The payload was checked field by field against its type just above.
  return {
    schemaVersion: 1,
    commandId: v.commandId,
    correlationId: v.correlationId,
    submittedAt: v.submittedAt,
    pairId: v.pairId,
    partition: v.partition,
    type: v.type,
    payload,
  } as unknown as CommandEnvelope;
}
