// Iceberg orders: a resting order that shows `display` of its volume at a time. Its node's
// `remaining` is the shown part (what the book, its depth and a fill see); `hidden` is the
// rest. When the shown part fills, the next part is shown and goes to the back of its level.
// No I/O, no clock.

import { addScaled, formatValue, type Scaled, subScaled } from "./decimal-scale";
import type { OrderNode } from "./order-book";

/** The order's whole unfilled volume, shown and hidden, as canonical text. */
export function unfilledText(node: OrderNode): string {
  return node.hidden === 0
    ? node.remainingText
    : formatValue(addScaled(node.remaining, node.hidden), node.amountDecimals);
}

/** What the order has executed: its total less everything unfilled, shown or hidden. */
export function executedText(node: OrderNode): string {
  const unfilled = addScaled(node.remaining, node.hidden);
  return formatValue(subScaled(node.volumeTotal, unfilled), node.amountDecimals);
}

/**
 * Splits an iceberg's unfilled volume into the part shown (at most `display`) and the
 * hidden rest, onto its node; a plain order shows all of it.
 */
export function showNext(node: OrderNode, total: Scaled): void {
  const shown = node.display !== 0 && node.display < total ? node.display : total;
  node.remaining = shown;
  node.accepted = shown;
  node.remainingText = formatValue(shown, node.amountDecimals);
  node.hidden = subScaled(total, shown);
}
