// Exact quote arithmetic of a fill: price times volume rounded once in the book's favour,
// and the independent cross-check of that rounding.

import {
  addScaled,
  divScaled,
  mulScaled,
  pow10Value,
  type Scaled,
  subScaled,
} from "./decimal-scale";
import type { Side } from "./types";

/** True when a taker on `side` at `price` would trade against a level at `levelPrice`. */
export function crosses(side: Side, price: Scaled, levelPrice: Scaled): boolean {
  return side === "bid" ? levelPrice <= price : levelPrice >= price;
}

/**
 * `product` (price × volume) × 10^quoteDecimals / 10^scaleShift, rounded to a whole quote unit in the
 * book's favour, without leaving exactness: up when the maker sells (the resting ask is never
 * paid less than its price, and a fill never moves volume for nothing), down when the maker
 * buys (the resting bid never pays more than its price).
 */
export function quoteOf(
  product: Scaled,
  quoteDecimals: number,
  scaleShift: number,
  roundUp: boolean,
): Scaled {
  // With more quote decimals than price and amount decimals together the quote is exact.
  if (quoteDecimals >= scaleShift)
    return mulScaled(product, pow10Value(quoteDecimals - scaleShift));
  const unit = pow10Value(scaleShift - quoteDecimals);
  const floor = divScaled(product, unit);
  return roundUp && mulScaled(floor, unit) !== product ? addScaled(floor, 1) : floor;
}

/**
 * True when `quote` (in quote units) is `product`, price × volume in units of 10^-scaleShift, rounded
 * to a whole quote unit by less than one unit: up when the maker sells, down when it buys.
 * Checked the other way round from quoteOf (a multiplication where it divides, a division
 * where it multiplies), so the two cannot share a slip.
 */
export function quoteRoundedOnce(
  quote: Scaled,
  product: Scaled,
  quoteDecimals: number,
  scaleShift: number,
  roundUp: boolean,
): boolean {
  // As many quote decimals as price and amount decimals together, or more: the quote is exact,
  // so dividing it back gives the product with nothing left over.
  if (quoteDecimals >= scaleShift) {
    const scale = pow10Value(quoteDecimals - scaleShift);
    const back = divScaled(quote, scale);
    return back === product && mulScaled(back, scale) === quote;
  }
  const unit = pow10Value(scaleShift - quoteDecimals);
  const over = subScaled(mulScaled(quote, unit), product);
  return roundUp ? over >= 0 && over < unit : over <= 0 && over > -unit;
}
