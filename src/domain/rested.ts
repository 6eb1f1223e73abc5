// An order that rests: its book change and its order.rested.v1, for a taker that rests, an
// amended order that rests again, and an iceberg that shows its next part. No I/O, no clock.

import type { EngineState } from "./engine-state";
import type { EventLog, OrderRestedPayload } from "./events";
import { executedText, showNext } from "./iceberg";
import { type OrderNode, type PairBook, toRestingOrder } from "./order-book";
import type { BookChange } from "./types";

/** A resting order's put and its order.rested.v1. */
export function emitRested(node: OrderNode, log: EventLog, changes: BookChange[]): void {
  const state = toRestingOrder(node);
  changes.push({ op: "put", order: state });
  const payload: OrderRestedPayload = {
    orderId: node.id,
    userId: node.userId,
    pairId: node.pairId,
    side: node.side,
    price: node.priceText,
    volume: state.volume,
    volumeTotal: node.volumeTotalText,
    executedVolume: executedText(node),
    timestamp: node.timestamp,
    stp: node.stp,
  };
  // Added only when set: a plain order's payload keeps the one shape it always had.
  if (node.expireAt !== 0) payload.expireAt = node.expireAt;
  if (node.display !== 0) {
    payload.displayVolume = state.displayVolume;
    payload.hiddenVolume = state.hiddenVolume;
  }
  log.push("order.rested.v1", payload);
}

/**
 * After its shown part filled: the next part is shown, last in its level's queue with a new
 * sequence (the order loses its time priority), with its put and an order.rested.v1.
 */
export function refresh(
  s: EngineState,
  book: PairBook,
  node: OrderNode,
  log: EventLog,
  changes: BookChange[],
): void {
  book.remove(node);
  showNext(node, node.hidden);
  node.sequence = s.nextSequence++;
  book.insert(node);
  s.armExpiry(node);
  emitRested(node, log, changes);
}
