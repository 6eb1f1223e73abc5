// Turns an order.place payload into scaled integers, or a reject with its stable code. The checks
// run in a fixed, documented order so the same bad input always gets the same answer.

import { type DecimalError, MAX_DECIMALS, parseScaledValue, type Scaled } from "./decimal-scale";
import { type ResultCode, ResultCodes } from "./result-codes";
import type { PlaceOrderPayload, StpMode, TimeInForce } from "./types";

export interface ParsedPlace {
  /** Zero for market orders: their price is never read. */
  price: Scaled;
  volume: Scaled;
  volumeTotal: Scaled;
  quoteVolume: Scaled;
  /** A market bid with quoteVolume > 0 spends a quote budget instead of buying a base volume. */
  quoteSized: boolean;
  timeInForce: TimeInForce;
  postOnly: boolean;
  stp: StpMode;
}

export interface PlaceReject {
  code: ResultCode;
  reason: string;
}

const problemCodes = {
  "bad-decimal": ResultCodes.badDecimal,
  exponent: ResultCodes.badDecimal,
  negative: ResultCodes.nonPositive,
  precision: ResultCodes.precisionExceeded,
  magnitude: ResultCodes.magnitudeExceeded,
} as const;

function decimalReject(field: string, error: DecimalError): PlaceReject {
  return { code: problemCodes[error.problem], reason: `${field}: ${error.reason}` };
}

function validDecimals(value: unknown): boolean {
  return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_DECIMALS;
}

/**
 * Check order: envelope/payload pair, precisions, price (limit only), volume, volumeTotal,
 * quoteVolume, positivity of the sizing field, volume <= volumeTotal, option combinations.
 */
export function validatePlace(
  payload: PlaceOrderPayload,
  envelopePairId: number,
): ParsedPlace | PlaceReject {
  if (payload.pairId !== envelopePairId) {
    return { code: ResultCodes.pairMismatch, reason: "payload pairId differs from envelope" };
  }
  const { priceDecimals, amountDecimals, quoteDecimals } = payload;
  if (
    !validDecimals(priceDecimals) ||
    !validDecimals(amountDecimals) ||
    !validDecimals(quoteDecimals)
  ) {
    return {
      code: ResultCodes.badPrecision,
      reason: `decimals must be integers 0..${MAX_DECIMALS}`,
    };
  }
  const isLimit = payload.type === "limit";
  let price: Scaled = 0;
  if (isLimit) {
    const parsed = parseScaledValue(payload.price, priceDecimals);
    if (typeof parsed === "object") return decimalReject("price", parsed);
    if (parsed === 0) return { code: ResultCodes.nonPositive, reason: "price: zero" };
    price = parsed;
  }
  const volume = parseScaledValue(payload.volume, amountDecimals);
  if (typeof volume === "object") return decimalReject("volume", volume);
  // The usual order repeats its volume as volumeTotal; the same text parses to the same value.
  const volumeTotal =
    payload.volumeTotal === payload.volume
      ? volume
      : parseScaledValue(payload.volumeTotal, amountDecimals);
  if (typeof volumeTotal === "object") return decimalReject("volumeTotal", volumeTotal);
  const quoteVolume = parseScaledValue(payload.quoteVolume, quoteDecimals);
  if (typeof quoteVolume === "object") return decimalReject("quoteVolume", quoteVolume);
  const quoteSized = payload.type === "market" && payload.side === "bid" && quoteVolume > 0;
  if (!quoteSized) {
    if (volume === 0) return { code: ResultCodes.nonPositive, reason: "volume: zero" };
    if (volume > volumeTotal) {
      return { code: ResultCodes.volumeExceedsTotal, reason: "volume exceeds volumeTotal" };
    }
  }
  const timeInForce = payload.timeInForce ?? "gtc";
  const postOnly = payload.postOnly === true;
  if (postOnly && (!isLimit || timeInForce !== "gtc")) {
    return {
      code: ResultCodes.unsupportedCombination,
      reason: "post-only needs a GTC limit order",
    };
  }
  if (quoteSized && timeInForce === "fok") {
    return { code: ResultCodes.unsupportedCombination, reason: "fok needs a base-volume order" };
  }
  return {
    price,
    volume,
    volumeTotal,
    quoteVolume,
    quoteSized,
    timeInForce,
    postOnly,
    stp: payload.stp ?? "none",
  };
}
