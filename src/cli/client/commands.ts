/**
 * Command envelopes as `matchd order` sends them: the wire contract's schemaVersion 1,
 * the partition derived from the pair (pairId mod partitionCount), and a fresh UUID as the
 * command id, reused as the correlation id so a reply and a stored result find each other.
 */

import type { z } from "zod";
import type { CommandEnvelope, PlaceOrderPayload } from "../../domain/index";
import type { cancelSchema, placeSchema } from "./options";

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
  if (o["--post-only"]) payload.postOnly = true;
  if (o["--stp"] !== undefined) payload.stp = o["--stp"];
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
