// Turns an order.place payload into scaled integers, or a reject with its stable code. The checks
// run in a fixed, documented order so the same bad input always gets the same answer.

import {
  type DecimalError,
  formatValue,
  isCanonicalDecimal,
  MAX_DECIMALS,
  parseScaledValue,
  type Scaled,
} from "./decimal-scale";
import { type ResultCode, ResultCodes } from "./result-codes";
import type { PlaceOrderPayload, StpMode, TimeInForce } from "./types";

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

export function decimalReject(field: string, error: DecimalError): PlaceReject {
  return { code: problemCodes[error.problem], reason: `${field}: ${error.reason}` };
}

/** The precisions an order may have: whole numbers 0..MAX_DECIMALS (the loader's bound too). */
export function validDecimals(value: unknown): boolean {
  return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_DECIMALS;
}

/**
 * The last successful parse of one field. Orders repeat the same few price and volume texts, and
 * a parse is a pure function of (text, decimals), so a repeat costs one string comparison.
 */
class DecimalMemo {
  private text = "";
  private decimals = -1;
  private value: Scaled = 0;
  private canonical = "";

  parse(text: unknown, decimals: number): Scaled | DecimalError {
    if (text === this.text && decimals === this.decimals) return this.value;
    const value = parseScaledValue(text, decimals);
    if (typeof value === "object") return value;
    this.text = text as string;
    this.decimals = decimals;
    this.value = value;
    this.canonical = "";
    return value;
  }

  /** Canonical text of the value the last parse returned (the caller's text when canonical). */
  canonicalText(): string {
    if (this.canonical === "") {
      this.canonical = isCanonicalDecimal(this.text)
        ? this.text
        : formatValue(this.value, this.decimals);
    }
    return this.canonical;
  }
}

/**
 * A valid order's fields as scaled integers, plus canonical texts. One instance is refilled per
 * command: the engine validates one command at a time and keeps no reference past it.
 */
export class ParsedPlace {
  /** Zero for market orders: their price is never read. */
  price: Scaled = 0;
  /** Canonical price text; "0" for market orders. */
  priceText = "0";
  volume: Scaled = 0;
  /** Canonical volume text. */
  volumeText = "0";
  volumeTotal: Scaled = 0;
  quoteVolume: Scaled = 0;
  /** A market bid with quoteVolume > 0 spends a quote budget instead of buying a base volume. */
  quoteSized = false;
  /** A stop-limit or stop-market order: it waits for a trade at its stop price. */
  stop = false;
  stopPrice: Scaled = 0;
  stopPriceText = "0";
  timeInForce: TimeInForce = "gtc";
  /** A good-till-date order's deadline, epoch milliseconds; 0 for every other order. */
  expireAt = 0;
  /** An iceberg's volume shown at a time; 0 for every other order. */
  display: Scaled = 0;
  postOnly = false;
  stp: StpMode = "none";
}

const badPrecision: PlaceReject = {
  code: ResultCodes.badPrecision,
  reason: `decimals must be integers 0..${MAX_DECIMALS}`,
};

/** Why fields that are each valid cannot go together in one order; undefined: they can. */
function combinationReason(
  stop: boolean,
  isLimit: boolean,
  quoteSized: boolean,
  volume: Scaled,
  timeInForce: string,
  postOnly: boolean,
): string | undefined {
  if (postOnly && stop) return "post-only cannot be a stop order";
  if (postOnly && (!isLimit || (timeInForce !== "gtc" && timeInForce !== "gtd"))) {
    return "post-only needs a GTC or GTD limit order";
  }
  // Two sizes at once: the budget would be spent past the base volume, filling the order
  // beyond what it was accepted with. Producers send volume "0" with a quote budget.
  if (quoteSized && volume > 0) return "a market bid sized by quoteVolume sends volume 0";
  if (quoteSized && timeInForce === "fok") return "fok needs a base-volume order";
  return undefined;
}

/** Why a good-till-date order's fields do not go together; undefined: they do. */
function expiryReason(kind: string, timeInForce: string, expireAt: unknown): string | undefined {
  const gtd = timeInForce === "gtd";
  if (gtd && expireAt === undefined) return "gtd needs expireAt";
  if (!gtd && expireAt !== undefined) return "expireAt needs timeInForce gtd";
  if (gtd && kind === "market") return "a market order cannot be gtd: it never rests";
  return undefined;
}

/** Why an iceberg's fields do not go together; undefined: they do (or it is no iceberg). */
function icebergReason(
  kind: string,
  timeInForce: string,
  display: Scaled,
  volume: Scaled,
): string | undefined {
  if (display === 0) return undefined;
  if (kind !== "limit" || (timeInForce !== "gtc" && timeInForce !== "gtd")) {
    return "an iceberg is a GTC or GTD limit order";
  }
  if (display >= volume) return "displayVolume must be below volume";
  return undefined;
}

/** The first reason the order's options cannot go together, in the order the checks run. */
function combinationOf(
  payload: PlaceOrderPayload,
  stop: boolean,
  isLimit: boolean,
  quoteSized: boolean,
  volume: Scaled,
  display: Scaled,
): string | undefined {
  const kind = payload.type;
  const timeInForce = payload.timeInForce ?? "gtc";
  const postOnly = payload.postOnly === true;
  // The two later checks only for an order that could fail them: every place runs this.
  return (
    combinationReason(stop, isLimit, quoteSized, volume, timeInForce, postOnly) ??
    (timeInForce === "gtd" || payload.expireAt !== undefined
      ? expiryReason(kind, timeInForce, payload.expireAt)
      : undefined) ??
    (display !== 0 ? icebergReason(kind, timeInForce, display, volume) : undefined)
  );
}

/**
 * Validates order.place payloads. Check order: envelope/payload pair, precisions, price (a
 * decimal for every order, positive for a limit), a stop's stopPrice, volume, volumeTotal,
 * quoteVolume, positivity of the sizing field, volume <= volumeTotal, option combinations.
 * Parses go through per-field memos, and the result is one reused object.
 */
export class PlaceValidator {
  private readonly priceMemo = new DecimalMemo();
  private readonly volumeMemo = new DecimalMemo();
  private readonly volumeTotalMemo = new DecimalMemo();
  private readonly quoteMemo = new DecimalMemo();
  private readonly stopPriceMemo = new DecimalMemo();
  private readonly displayMemo = new DecimalMemo();
  private readonly result = new ParsedPlace();

  /** The returned ParsedPlace is overwritten by the next call. */
  validate(payload: PlaceOrderPayload, envelopePairId: number): ParsedPlace | PlaceReject {
    if (payload.pairId !== envelopePairId) {
      return { code: ResultCodes.pairMismatch, reason: "payload pairId differs from envelope" };
    }
    const { priceDecimals, amountDecimals, quoteDecimals } = payload;
    const decimalsOk =
      validDecimals(priceDecimals) && validDecimals(amountDecimals) && validDecimals(quoteDecimals);
    if (!decimalsOk) return badPrecision;
    const kind = payload.type;
    const stop = kind === "stop-limit" || kind === "stop-market";
    const isLimit = kind === "limit" || kind === "stop-limit";
    let price: Scaled = 0;
    // A market order trades at the makers' prices and ignores its own, but the field must still
    // be a decimal (producers send "0"): garbage there is a malformed command, not a default.
    const parsedPrice = this.priceMemo.parse(payload.price, priceDecimals);
    if (typeof parsedPrice === "object") return decimalReject("price", parsedPrice);
    if (isLimit) {
      if (parsedPrice === 0) return { code: ResultCodes.nonPositive, reason: "price: zero" };
      price = parsedPrice;
    }
    let stopPrice: Scaled = 0;
    if (stop) {
      const parsedStop = this.parseStopPrice(payload.stopPrice, priceDecimals);
      if (typeof parsedStop === "object") return parsedStop;
      stopPrice = parsedStop;
    }
    const volume = this.volumeMemo.parse(payload.volume, amountDecimals);
    if (typeof volume === "object") return decimalReject("volume", volume);
    // The usual order repeats its volume as volumeTotal; the same text parses to the same value.
    const volumeTotal =
      payload.volumeTotal === payload.volume
        ? volume
        : this.volumeTotalMemo.parse(payload.volumeTotal, amountDecimals);
    if (typeof volumeTotal === "object") return decimalReject("volumeTotal", volumeTotal);
    const quoteVolume = this.quoteMemo.parse(payload.quoteVolume, quoteDecimals);
    if (typeof quoteVolume === "object") return decimalReject("quoteVolume", quoteVolume);
    const quoteSized =
      (kind === "market" || kind === "stop-market") && payload.side === "bid" && quoteVolume > 0;
    if (!quoteSized) {
      if (volume === 0) return { code: ResultCodes.nonPositive, reason: "volume: zero" };
      if (volume > volumeTotal) {
        return { code: ResultCodes.volumeExceedsTotal, reason: "volume exceeds volumeTotal" };
      }
    }
    const display = this.parseDisplay(payload.displayVolume, amountDecimals);
    if (typeof display === "object") return display;
    const timeInForce = payload.timeInForce ?? "gtc";
    const postOnly = payload.postOnly === true;
    const combination = combinationOf(payload, stop, isLimit, quoteSized, volume, display);
    if (combination !== undefined) {
      return { code: ResultCodes.unsupportedCombination, reason: combination };
    }
    const result = this.result;
    result.price = price;
    result.priceText = isLimit ? this.priceMemo.canonicalText() : "0";
    result.volume = volume;
    result.volumeText = this.volumeMemo.canonicalText();
    result.volumeTotal = volumeTotal;
    result.quoteVolume = quoteVolume;
    result.quoteSized = quoteSized;
    result.timeInForce = timeInForce;
    result.expireAt = payload.expireAt ?? 0;
    result.display = display;
    result.postOnly = postOnly;
    result.stp = payload.stp ?? "none";
    result.stop = stop;
    result.stopPrice = stopPrice;
    result.stopPriceText = stop ? this.stopPriceMemo.canonicalText() : "0";
    return result;
  }

  /** An iceberg's displayVolume, or 0 for an order without one. */
  private parseDisplay(text: unknown, amountDecimals: number): Scaled | PlaceReject {
    if (text === undefined) return 0;
    const parsed = this.displayMemo.parse(text, amountDecimals);
    if (typeof parsed === "object") return decimalReject("displayVolume", parsed);
    if (parsed === 0) return { code: ResultCodes.nonPositive, reason: "displayVolume: zero" };
    return parsed;
  }

  private parseStopPrice(text: unknown, priceDecimals: number): Scaled | PlaceReject {
    if (text === undefined) {
      return { code: ResultCodes.badEnvelope, reason: "stopPrice: required for stop orders" };
    }
    const parsed = this.stopPriceMemo.parse(text, priceDecimals);
    if (typeof parsed === "object") return decimalReject("stopPrice", parsed);
    if (parsed === 0) return { code: ResultCodes.nonPositive, reason: "stopPrice: zero" };
    return parsed;
  }
}
