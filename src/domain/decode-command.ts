// Structural decoding of a command envelope with zod: shape and types only. Money values are
// checked later by the engine, so every reject reason comes from one place.

import { z } from "zod";
import {
  decodeValidCommand,
  isCommandIdText,
  isIsoTimestamp,
  MAX_COMMAND_ID_BYTES,
} from "./decode-command-fast";
import { type ResultCode, ResultCodes } from "./result-codes";
import type { CommandEnvelope } from "./types";

const idText = z.string().min(1).max(200);
const commandIdText = idText.refine(isCommandIdText, {
  message: `must take at most ${MAX_COMMAND_ID_BYTES} bytes in UTF-8 (its events' ids become AMQP message ids)`,
});
/** Producers use string user ids; a numeric id is accepted and turned into its decimal text. */
const userIdText = z.union([idText, z.number().int().nonnegative()]).transform((v) => String(v));
const pairId = z.number().int().positive();
const decimals = z.number().int().min(0).max(18);

const placePayload = z
  .looseObject({
    id: idText,
    userId: userIdText,
    side: z.enum(["bid", "ask"]),
    type: z.enum(["limit", "market", "stop-limit", "stop-market"]),
    pairId,
    timestamp: z.number().int().nonnegative(),
    price: z.string(),
    volume: z.string(),
    volumeTotal: z.string(),
    quoteVolume: z.string(),
    priceDecimals: decimals,
    amountDecimals: decimals,
    quoteDecimals: decimals,
    role: z.string().optional(),
    timeInForce: z.enum(["gtc", "ioc", "fok", "gtd"]).optional(),
    // Epoch milliseconds; whether it goes with timeInForce is the engine's check.
    expireAt: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
    postOnly: z.boolean().optional(),
    stp: z.enum(["none", "cancel-taker", "cancel-maker", "cancel-both"]).optional(),
    // Checked only on stop orders (below): a limit or market order ignores it, as it always
    // ignored extra fields, so today's commands decode as before (and the fast path agrees).
    stopPrice: z.unknown().optional(),
    displayVolume: z.string().optional(),
  })
  .superRefine((payload, context) => {
    const stop = payload.type === "stop-limit" || payload.type === "stop-market";
    if (stop && typeof payload.stopPrice !== "string") {
      context.addIssue({
        code: "custom",
        path: ["stopPrice"],
        message: "a stop order needs stopPrice, a decimal string",
      });
    }
  });

const cancelPayload = z.looseObject({ id: idText, userId: userIdText, pairId });

// At least one of volume, price and stopPrice is the engine's check: a pair mismatch is
// reported first (docs/orders.md), so an amend without any decodes.
const amendPayload = z.looseObject({
  id: idText,
  userId: userIdText,
  pairId,
  volume: z.string().optional(),
  price: z.string().optional(),
  stopPrice: z.string().optional(),
});

const cancelAllPayload = z.looseObject({ userId: userIdText, pairId: pairId.optional() });

const pairControlPayload = z.looseObject({ pairId, reason: z.string().min(1).max(200) });

// Its range (0, or 1,000..86,400,000) is the engine's check: bad-timeout, not a bad envelope.
const cancelAfterPayload = z.looseObject({
  userId: userIdText,
  timeoutMs: z.number(),
});

const placeOcoPayload = z.looseObject({
  listId: idText,
  userId: userIdText,
  pairId,
  legs: z.array(placePayload).length(2),
});

/** Every command type the contract knows; any other is unknown-command-type, not a bad envelope. */
const commandTypes: ReadonlySet<unknown> = new Set([
  "order.place",
  "order.cancel",
  "order.amend",
  "order.cancel-all",
  "pair.halt",
  "pair.resume",
  "session.cancel-after",
  "order.place-oco",
]);

const base = {
  schemaVersion: z.literal(1),
  commandId: commandIdText,
  correlationId: z.string().max(200),
  submittedAt: z.string().refine(isIsoTimestamp, "expected an ISO-8601 date and time"),
  pairId,
  partition: z.number().int().nonnegative(),
};

const envelopeSchema = z.discriminatedUnion("type", [
  z.object({ ...base, type: z.literal("order.place"), payload: placePayload }),
  z.object({ ...base, type: z.literal("order.cancel"), payload: cancelPayload }),
  z.object({ ...base, type: z.literal("order.amend"), payload: amendPayload }),
  z.object({ ...base, type: z.literal("order.cancel-all"), payload: cancelAllPayload }),
  z.object({ ...base, type: z.literal("pair.halt"), payload: pairControlPayload }),
  z.object({ ...base, type: z.literal("pair.resume"), payload: pairControlPayload }),
  z.object({ ...base, type: z.literal("session.cancel-after"), payload: cancelAfterPayload }),
  z.object({ ...base, type: z.literal("order.place-oco"), payload: placeOcoPayload }),
]);

export type DecodeResult =
  | { ok: true; command: CommandEnvelope }
  | ({ ok: false; code: ResultCode; reason: string } & SalvagedHints);

/** Decodes an already-unwrapped JSON value; returns a reject value, never throws. */
export function decodeCommand(value: unknown): DecodeResult {
  const valid = decodeValidCommand(value);
  if (valid !== undefined) return { ok: true, command: valid };
  return decodeWithSchema(value);
}

/**
 * The refused type for a reason text, never throwing: a superjson body can make it a BigInt
 * or (through its referential equalities) an object that contains itself, which
 * JSON.stringify refuses, and a throw here would fail the whole batch on every redelivery.
 */
function describeType(type: unknown): string {
  return typeof type === "string" ? JSON.stringify(type).slice(0, 80) : `of kind ${typeof type}`;
}

/** The zod path alone: the reference the fast check is tested against. */
export function decodeWithSchema(value: unknown): DecodeResult {
  const parsed = envelopeSchema.safeParse(value);
  if (parsed.success) return { ok: true, command: parsed.data as CommandEnvelope };
  const hints = salvageHints(value);
  const type = isRecord(value) ? value.type : undefined;
  const unknownType = type !== undefined && !commandTypes.has(type);
  const reason = parsed.error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`)
    .join("; ");
  return {
    ok: false,
    code: unknownType ? ResultCodes.unknownCommandType : ResultCodes.badEnvelope,
    reason: unknownType ? `unknown command type ${describeType(type)}` : reason,
    ...hints,
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The identifying fields that survive in a bad command, so its reject can be correlated. */
export interface SalvagedHints {
  commandId?: string;
  correlationId?: string;
  pairId?: number;
  orderId?: string;
  userId?: string;
  partition?: number;
  submittedAt?: string;
}

/** Picks whatever identifying fields survive in a bad command. */
function salvageHints(value: unknown): SalvagedHints {
  if (!isRecord(value)) return {};
  const hints: ReturnType<typeof salvageHints> = {};
  // An id too long to be valid (in units or in bytes) is not cut to fit: two such ids sharing their first 200
  // characters would share one stored result. Without an id the command is dead-lettered.
  if (isCommandIdText(value.commandId)) {
    hints.commandId = value.commandId;
  }
  if (typeof value.correlationId === "string")
    hints.correlationId = value.correlationId.slice(0, 200);
  // Only a valid one: it becomes the rejection event's occurredAt.
  if (isIsoTimestamp(value.submittedAt)) hints.submittedAt = value.submittedAt;
  if (Number.isSafeInteger(value.pairId)) hints.pairId = value.pairId as number;
  if (Number.isSafeInteger(value.partition)) hints.partition = value.partition as number;
  const payload = value.payload;
  if (isRecord(payload)) {
    if (typeof payload.id === "string") hints.orderId = payload.id.slice(0, 200);
    if (typeof payload.userId === "string") hints.userId = payload.userId.slice(0, 200);
    if (hints.pairId === undefined && Number.isSafeInteger(payload.pairId)) {
      hints.pairId = payload.pairId as number;
    }
  }
  return hints;
}
