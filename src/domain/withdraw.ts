// Taking an order out without a trade: a resting order's or a stop's cancel with its
// order.cancelled.v1, and the end of a one-cancels-other pair, whose other leg is cancelled
// in the same command whatever ended the first (a fill, a trigger, a cancel, an expiry).
// No I/O, no clock.

import { formatValue, subScaled } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import type { CancelReason, EventLog } from "./events";
import { executedText, unfilledText } from "./iceberg";
import { type OrderNode, toRestingOrder } from "./order-book";
import { type ResultCode, ResultCodes } from "./result-codes";
import { type StopNode, toStopOrder } from "./stop-book";
import type { BookChange } from "./types";

/**
 * Takes a resting order out of the book with its order.cancelled.v1; `code` is the event's
 * (ok, or stp-cancelled for a maker self-trade prevention takes).
 */
export function cancelResting(
  s: EngineState,
  node: OrderNode,
  reason: CancelReason,
  log: EventLog,
  changes: BookChange[],
  code: ResultCode = ResultCodes.ok,
): { executed: string; remaining: string } {
  takeOutResting(s, node, changes);
  const executed = executedText(node);
  // An iceberg's hidden part goes too: the volume cancelled is all it had unfilled.
  const volume = unfilledText(node);
  // On the order's own pair: a cancel-all of the partition, or a fired switch, spans pairs.
  log.pushOnPair(node.pairId, "order.cancelled.v1", {
    orderId: node.id,
    userId: node.userId,
    pairId: node.pairId,
    side: node.side,
    price: node.priceText,
    volume,
    volumeTotal: node.volumeTotalText,
    executedVolume: executed,
    reason,
    code,
  });
  breakLink(s, node, log, changes);
  return { executed, remaining: volume };
}

/** Takes a resting order out of its book and the index, finished, with its book change. */
export function takeOutResting(s: EngineState, node: OrderNode, changes: BookChange[]): void {
  const state = toRestingOrder(node);
  s.bookOf(node.pairId)!.remove(node);
  s.orders.finishResting(node);
  changes.push({ op: "remove", order: state });
}

/** What a stop executed before: its total less its unfilled volume. */
export function stopExecutedText(stop: StopNode): string {
  return formatValue(subScaled(stop.volumeTotal, stop.volume), stop.amountDecimals);
}

/** Takes a stop out of its stop book and the index, with its book change. */
export function removeStop(s: EngineState, stop: StopNode, changes: BookChange[]): void {
  s.bookOf(stop.pairId)!.stops.remove(stop);
  s.stops.delete(stop.id);
  s.recountExtras();
  changes.push({ op: "stop-remove", stop: toStopOrder(stop) });
}

/** Takes a stop out of its stop book with its order.cancelled.v1. */
export function cancelStop(
  s: EngineState,
  stop: StopNode,
  reason: CancelReason,
  log: EventLog,
  changes: BookChange[],
): { executed: string; remaining: string } {
  removeStop(s, stop, changes);
  s.orders.finish(stop.id);
  const executed = stopExecutedText(stop);
  log.pushOnPair(stop.pairId, "order.cancelled.v1", {
    orderId: stop.id,
    userId: stop.userId,
    pairId: stop.pairId,
    side: stop.side,
    price: stop.priceText,
    volume: stop.volumeText,
    volumeTotal: stop.volumeTotalText,
    executedVolume: executed,
    reason,
    code: ResultCodes.ok,
    quoteVolume: stop.quoteSized ? stop.quoteVolumeText : undefined,
    stopPrice: stop.stopPriceText,
  });
  breakLink(s, stop, log, changes);
  return { executed, remaining: stop.volumeText };
}

/** True while an order or stop still waits: an earlier cancel may have taken its list's leg. */
export function waiting(s: EngineState, node: OrderNode | StopNode): boolean {
  return "stopPrice" in node ? s.stops.get(node.id) === node : s.orders.get(node.id) === node;
}

/**
 * Ends `node`'s one-cancels-other pair, if it has one: the link goes from both legs first (so
 * the other's cancel does not come back here), then the other leg is cancelled, reason oco.
 * Called when a leg fills (even partly), triggers, is cancelled or expires.
 */
export function breakLink(
  s: EngineState,
  node: OrderNode | StopNode,
  log: EventLog,
  changes: BookChange[],
): void {
  if (node.linked === "") return;
  const otherId = node.linked;
  node.linked = "";
  node.listId = "";
  // A leg still resting (partly filled) is stored again, without its link.
  if (!("stopPrice" in node) && s.orders.get(node.id) === node) {
    changes.push({ op: "put", order: toRestingOrder(node) });
  }
  const other = s.waitingOrder(otherId);
  if (other === undefined || other.linked !== node.id) return;
  other.linked = "";
  other.listId = "";
  // The other leg is the very order taking now (an amend re-matching it, out of its level):
  // the two legs traded with each other, and the list is over; the taker is not cancelled.
  if (!("stopPrice" in other) && other.level === null) return;
  if ("stopPrice" in other) cancelStop(s, other, "oco", log, changes);
  else cancelResting(s, other, "oco", log, changes);
}
