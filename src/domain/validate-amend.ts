// Parses an order.amend's values against the amended order's own precisions, in the order the
// checks are documented (docs/orders.md): volume, then price, then stopPrice.

import { parseScaledValue, type Scaled } from "./decimal-scale";
import { ResultCodes } from "./result-codes";
import type { AmendOrderPayload } from "./types";
import { decimalReject, type PlaceReject } from "./validate-place";

/** The given values, scaled; undefined where the amend leaves the order's own. */
export interface ParsedAmend {
  volume: Scaled | undefined;
  price: Scaled | undefined;
  stopPrice: Scaled | undefined;
}

export function parseAmend(
  payload: AmendOrderPayload,
  amountDecimals: number,
  priceDecimals: number,
): ParsedAmend | PlaceReject {
  const volume = parseField("volume", payload.volume, amountDecimals);
  if (typeof volume === "object") return volume;
  const price = parseField("price", payload.price, priceDecimals);
  if (typeof price === "object") return price;
  const stopPrice = parseField("stopPrice", payload.stopPrice, priceDecimals);
  if (typeof stopPrice === "object") return stopPrice;
  return { volume, price, stopPrice };
}

function parseField(
  field: string,
  text: string | undefined,
  decimals: number,
): Scaled | undefined | PlaceReject {
  if (text === undefined) return undefined;
  const value = parseScaledValue(text, decimals);
  if (typeof value === "object") return decimalReject(field, value);
  if (value === 0) return { code: ResultCodes.nonPositive, reason: `${field}: zero` };
  return value;
}
