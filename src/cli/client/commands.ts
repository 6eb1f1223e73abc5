/**
 * Command envelopes as `matchd order` sends them: the wire contract's schemaVersion 1,
 * the partition derived from the pair (pairId mod partitionCount), and a fresh UUID as the
 * command id, reused as the correlation id so a reply and a stored result find each other.
 */

import type { z } from "zod";
import type { AmendOrderPayload, CommandEnvelope, PlaceOrderPayload } from "../../domain/index";
import type {
  amendSchema,
  cancelAfterSchema,
  cancelAllSchema,
  cancelSchema,
  ocoSchema,
  pairSchema,
  placeSchema,
} from "./options";

export interface Stamp {
  commandId: string;
  orderId: string;
  nowMs: number;
}

function envelopeBase(pairId: number, partitionCount: number, stamp: Stamp) {
  return {
    schemaVersion: 1 as const,
    commandId: stamp.commandId,
    correlationId: stamp.commandId,
    submittedAt: new Date(stamp.nowMs).toISOString(),
    pairId,
    partition: pairId % partitionCount,
  };
}

export function placeCommand(
  o: z.output<typeof placeSchema>,
  partitionCount: number,
  stamp: Stamp,
): CommandEnvelope {
  const pairId = o["--pair"];
  const quoteSized = o["--quote-volume"] !== undefined;
  const volume = o["--volume"] ?? "0";
  const payload: PlaceOrderPayload = {
    id: o["--id"] ?? stamp.orderId,
    userId: o["--user"],
    side: o["--side"],
    type: o["--type"],
    pairId,
    timestamp: stamp.nowMs,
    price: o["--price"] ?? "0",
    volume: quoteSized ? "0" : volume,
    volumeTotal: quoteSized ? "0" : volume,
    quoteVolume: o["--quote-volume"] ?? "0",
    priceDecimals: o["--price-decimals"],
    amountDecimals: o["--amount-decimals"],
    quoteDecimals: o["--quote-decimals"],
    role: "taker",
  };
  if (o["--tif"] !== undefined) payload.timeInForce = o["--tif"];
  if (o["--display-volume"] !== undefined) payload.displayVolume = o["--display-volume"];
  if (o["--expire-at"] !== undefined) {
    payload.timeInForce = "gtd";
    payload.expireAt = o["--expire-at"];
  }
  if (o["--post-only"]) payload.postOnly = true;
  if (o["--stp"] !== undefined) payload.stp = o["--stp"];
  if (o["--stop-price"] !== undefined) payload.stopPrice = o["--stop-price"];
  return { ...envelopeBase(pairId, partitionCount, stamp), type: "order.place", payload };
}

export function cancelCommand(
  orderId: string,
  o: z.output<typeof cancelSchema>,
  partitionCount: number,
  stamp: Stamp,
): CommandEnvelope {
  const pairId = o["--pair"];
  return {
    ...envelopeBase(pairId, partitionCount, stamp),
    type: "order.cancel",
    payload: { id: orderId, userId: o["--user"], pairId },
  };
}

export function amendCommand(
  o: z.output<typeof amendSchema>,
  partitionCount: number,
  stamp: Stamp,
): CommandEnvelope {
  const pairId = o["--pair"];
  const payload: AmendOrderPayload = { id: o["--id"], userId: o["--user"], pairId };
  if (o["--volume"] !== undefined) payload.volume = o["--volume"];
  if (o["--price"] !== undefined) payload.price = o["--price"];
  if (o["--stop-price"] !== undefined) payload.stopPrice = o["--stop-price"];
  return { ...envelopeBase(pairId, partitionCount, stamp), type: "order.amend", payload };
}

/**
 * Without --pair the command goes to `partition` and names none in its payload. Its envelope
 * still needs a pair of that partition: the partition's own number, or (partition 0 has no
 * pair 0) the partition count, which is pair 0 mod the count.
 */
export function cancelAllCommand(
  o: z.output<typeof cancelAllSchema>,
  partition: number,
  partitionCount: number,
  stamp: Stamp,
): CommandEnvelope {
  const onePair = o["--pair"];
  const pairId = onePair ?? (partition === 0 ? partitionCount : partition);
  return {
    ...envelopeBase(pairId, partitionCount, stamp),
    type: "order.cancel-all",
    payload: onePair === undefined ? { userId: o["--user"] } : { userId: o["--user"], pairId },
  };
}

/** A take-profit limit and a stop, one-cancels-other; the legs' ids end -tp and -sl. */
export function ocoCommand(
  o: z.output<typeof ocoSchema>,
  partitionCount: number,
  stamp: Stamp,
): CommandEnvelope {
  const pairId = o["--pair"];
  const listId = o["--list-id"] ?? stamp.orderId;
  const limitPrice = o["--stop-limit-price"];
  const leg = (suffix: string, more: Partial<PlaceOrderPayload>): PlaceOrderPayload => ({
    id: `${listId}-${suffix}`,
    userId: o["--user"],
    side: o["--side"],
    type: "limit",
    pairId,
    timestamp: stamp.nowMs,
    price: o["--price"],
    volume: o["--volume"],
    volumeTotal: o["--volume"],
    quoteVolume: "0",
    priceDecimals: o["--price-decimals"],
    amountDecimals: o["--amount-decimals"],
    quoteDecimals: o["--quote-decimals"],
    role: "taker",
    ...(o["--expire-at"] === undefined ? {} : { timeInForce: "gtd", expireAt: o["--expire-at"] }),
    ...more,
  });
  const legs = [
    leg("tp", {}),
    leg("sl", {
      type: limitPrice === undefined ? "stop-market" : "stop-limit",
      price: limitPrice ?? "0",
      stopPrice: o["--stop-price"],
    }),
  ];
  return {
    ...envelopeBase(pairId, partitionCount, stamp),
    type: "order.place-oco",
    payload: { listId, userId: o["--user"], pairId, legs },
  };
}

/** Sent like a cancel-all: to `partition`, or to --pair's; the switch covers the partition. */
export function cancelAfterCommand(
  o: z.output<typeof cancelAfterSchema>,
  partition: number,
  partitionCount: number,
  stamp: Stamp,
): CommandEnvelope {
  const pairId = o["--pair"] ?? (partition === 0 ? partitionCount : partition);
  return {
    ...envelopeBase(pairId, partitionCount, stamp),
    type: "session.cancel-after",
    payload: { userId: o["--user"], timeoutMs: o["--timeout"] },
  };
}

export function pairCommand(
  action: "halt" | "resume",
  o: z.output<typeof pairSchema>,
  partitionCount: number,
  stamp: Stamp,
): CommandEnvelope {
  const pairId = o["--pair"];
  return {
    ...envelopeBase(pairId, partitionCount, stamp),
    type: action === "halt" ? "pair.halt" : "pair.resume",
    payload: { pairId, reason: o["--reason"] },
  };
}
