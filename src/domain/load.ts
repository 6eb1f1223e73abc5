// Rebuilding the engine from the datastore: resting orders, stops and halts, each checked as
// strictly as a placed order was; a stored value that breaks a rule halts the load.

import { addScaled, formatValue, parseScaledValue, type Scaled } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import { MatchingInvariantError } from "./invariant-error";
import type { OrderNode } from "./order-book";
import { FINISHED } from "./order-index";
import { parseStoredStop } from "./stored-stop";
import type { RestingOrder, StopOrder } from "./types";
import { validDecimals } from "./validate-place";

/** Rebuilds state from the datastore; the next sequence stays above every loaded one. */
export function loadRestingOrder(s: EngineState, order: RestingOrder): void {
  const known = s.orders.get(order.id);
  if (known !== undefined && known !== FINISHED) loadFailure(order, "duplicate id");
  // The same bounds a placed order passed: a stored order outside them was never accepted,
  // and would make every later order of its pair a precision mismatch.
  // No arrays or closures here: a book load calls this once per resting order, and the
  // garbage of a million calls grew the process's RSS by ~120 MiB (the bench's --resting).
  if (!validDecimals(order.priceDecimals)) loadFailure(order, "bad priceDecimals (0..18)");
  if (!validDecimals(order.amountDecimals)) loadFailure(order, "bad amountDecimals (0..18)");
  if (!validDecimals(order.quoteDecimals)) loadFailure(order, "bad quoteDecimals (0..18)");
  if (!Number.isSafeInteger(order.pairId) || order.pairId <= 0) loadFailure(order, "bad pairId");
  if (!Number.isSafeInteger(order.timestamp) || order.timestamp < 0)
    loadFailure(order, "bad timestamp");
  const price = parseScaledValue(order.price, order.priceDecimals);
  const remaining = parseScaledValue(order.volume, order.amountDecimals);
  const volumeTotal = parseScaledValue(order.volumeTotal, order.amountDecimals);
  if (typeof price === "object" || price <= 0) loadFailure(order, "bad price");
  if (typeof remaining === "object" || remaining <= 0) loadFailure(order, "bad volume");
  if (typeof volumeTotal === "object") loadFailure(order, "bad volumeTotal");
  if (!Number.isSafeInteger(order.sequence) || order.sequence < 0)
    loadFailure(order, "bad sequence");
  if (order.side !== "bid" && order.side !== "ask") loadFailure(order, "bad side");
  if (!stpModes.has(order.stp)) loadFailure(order, "bad stp mode");
  if (remaining > volumeTotal) loadFailure(order, "volume above volumeTotal");
  const expireAt = order.expireAt ?? 0;
  if (!Number.isSafeInteger(expireAt) || expireAt < 0) loadFailure(order, "bad expireAt");
  const { display, hidden } = icebergOf(order, remaining, volumeTotal);
  const book = s.books.get(order.pairId) ?? s.createBook(order.pairId);
  if (book.precisionDiffers(order.priceDecimals, order.amountDecimals, order.quoteDecimals)) {
    loadFailure(order, "precisions differ from the pair's other orders");
  }
  const node: OrderNode = {
    id: order.id,
    userId: order.userId,
    pairId: order.pairId,
    side: order.side,
    price,
    priceText: formatValue(price, order.priceDecimals),
    remaining,
    remainingText: formatValue(remaining, order.amountDecimals),
    accepted: remaining,
    volumeTotal,
    volumeTotalText: formatValue(volumeTotal, order.amountDecimals),
    timestamp: order.timestamp,
    sequence: order.sequence,
    priceDecimals: order.priceDecimals,
    amountDecimals: order.amountDecimals,
    quoteDecimals: order.quoteDecimals,
    stp: order.stp,
    postOnly: order.postOnly === true,
    expireAt,
    display,
    hidden,
    listId: order.listId ?? "",
    linked: order.linkedOrderId ?? "",
    level: null,
    handle: -1,
    prev: null,
    next: null,
  };
  book.insertBySequence(node);
  s.orders.rest(node);
  s.armExpiry(node);
  if (order.sequence >= s.nextSequence) s.nextSequence = order.sequence + 1;
}

/** Rebuilds a stop order from the datastore; the next sequence stays above it. */
export function loadStopOrder(s: EngineState, stop: StopOrder): void {
  const known = s.orders.get(stop.id);
  if ((known !== undefined && known !== FINISHED) || s.stops.has(stop.id)) {
    loadFailure(stop, "duplicate id");
  }
  const node = parseStoredStop(stop);
  const book = s.books.get(stop.pairId) ?? s.createBook(stop.pairId);
  if (book.precisionDiffers(stop.priceDecimals, stop.amountDecimals, stop.quoteDecimals)) {
    loadFailure(stop, "precisions differ from the pair's other orders");
  }
  book.stops.insert(node);
  s.stops.set(node.id, node);
  s.recountExtras();
  s.armExpiry(node);
  if (stop.sequence >= s.nextSequence) s.nextSequence = stop.sequence + 1;
}

/** Restores the engine's time from the datastore: it never goes back. */
export function loadClock(s: EngineState, now: number): void {
  if (!Number.isSafeInteger(now) || now < 0) {
    throw new MatchingInvariantError(`cannot load the engine's time ${now}`);
  }
  if (now > s.now) s.now = now;
}

/** Rebuilds an armed dead-man's switch from the datastore. */
export function loadSwitch(s: EngineState, userId: string, deadline: number): void {
  checkSession(userId, deadline);
  s.armSwitch(userId, deadline);
}

/** Rebuilds a fired switch whose user's orders were not all cancelled yet. */
export function loadSweep(s: EngineState, userId: string, deadline: number): void {
  checkSession(userId, deadline);
  s.sweeps.set(userId, deadline);
}

function checkSession(userId: string, deadline: number): void {
  if (
    typeof userId !== "string" ||
    userId === "" ||
    !Number.isSafeInteger(deadline) ||
    deadline < 0
  ) {
    throw new MatchingInvariantError(`cannot load the dead-man's switch of ${userId}: ${deadline}`);
  }
}

/** Rebuilds a pair's halt from the datastore. */
export function loadHalt(s: EngineState, pairId: number, reason: string): void {
  if (!Number.isSafeInteger(pairId) || pairId <= 0 || typeof reason !== "string") {
    throw new MatchingInvariantError(`cannot load the halt of pair ${pairId}`);
  }
  s.halts.set(pairId, reason);
  s.recountExtras();
}

/** A stored iceberg's shown size and hidden volume, checked; zeros for a plain order. */
function icebergOf(
  order: RestingOrder,
  shown: Scaled,
  volumeTotal: Scaled,
): { display: Scaled; hidden: Scaled } {
  if (order.displayVolume === undefined) return { display: 0, hidden: 0 };
  const display = parseScaledValue(order.displayVolume, order.amountDecimals);
  const hidden = parseScaledValue(order.hiddenVolume ?? "0", order.amountDecimals);
  if (typeof display === "object" || display <= 0) loadFailure(order, "bad displayVolume");
  if (typeof hidden === "object") loadFailure(order, "bad hiddenVolume");
  if (shown > display) loadFailure(order, "shows more than its displayVolume");
  if (addScaled(shown, hidden) > volumeTotal) {
    loadFailure(order, "volume and hiddenVolume above volumeTotal");
  }
  return { display, hidden };
}

const stpModes: ReadonlySet<string> = new Set([
  "none",
  "cancel-taker",
  "cancel-maker",
  "cancel-both",
]);

function loadFailure(order: { id: string }, why: string): never {
  throw new MatchingInvariantError(`cannot load order ${order.id}: ${why}`);
}
