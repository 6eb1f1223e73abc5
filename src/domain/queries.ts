// What the engine holds, read without changing it: resting orders, stops, halts and depth,
// each in a stated, canonical order.

import { addScaled, formatValue, type Scaled } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import { type PriceLevel, toRestingOrder } from "./order-book";
import { FINISHED } from "./order-index";
import { toStopOrder } from "./stop-book";
import type {
  Depth,
  DepthLevel,
  HaltedPair,
  RestingOrder,
  StopDepthLevel,
  StopOrder,
} from "./types";

/** Every stop order: pairs ascending, arrival order within a pair. */
export function* stopOrders(s: EngineState): Generator<StopOrder> {
  if (s.stops.size === 0) return;
  for (const book of s.sortedBooks()) {
    for (const node of book.stops.byArrival()) yield toStopOrder(node);
  }
}

/** One pair's stop orders in arrival order. */
export function stopOrdersOf(s: EngineState, pairId: number): StopOrder[] {
  return s.books.get(pairId)?.stops.byArrival().map(toStopOrder) ?? [];
}

/**
 * A pair's stops by stop price, nearest to triggering first (buy stops ascending, sell stops
 * descending: each side's own order), at most `levels` a side. Reads only those levels.
 */
export function stopDepth(s: EngineState, pairId: number, levels: number): StopDepthLevel[] {
  const out: StopDepthLevel[] = [];
  const book = s.books.get(pairId);
  if (book === undefined) return out;
  for (const list of [book.stops.bids, book.stops.asks]) {
    for (let i = 0, count = 0; i < list.length && count < levels; count++) {
      const first = list[i]!;
      let volume: Scaled = 0;
      let quote: Scaled = 0;
      let orders = 0;
      for (; i < list.length && list[i]!.stopPrice === first.stopPrice; i++, orders++) {
        volume = addScaled(volume, list[i]!.volume);
        quote = addScaled(quote, list[i]!.quoteVolume);
      }
      out.push({
        side: first.side,
        stopPrice: first.stopPriceText,
        volume: formatValue(volume, first.amountDecimals),
        quoteVolume: formatValue(quote, first.quoteDecimals),
        orders,
      });
    }
  }
  return out;
}

export function getStopOrder(s: EngineState, orderId: string): StopOrder | undefined {
  const node = s.stops.get(orderId);
  return node === undefined ? undefined : toStopOrder(node);
}

export function stopOrderCount(s: EngineState, pairId?: number): number {
  if (pairId === undefined) return s.stops.size;
  return s.books.get(pairId)?.stops.size ?? 0;
}

/** Halted pairs, ascending. */
export function haltedPairs(s: EngineState): HaltedPair[] {
  return [...s.halts].sort((a, b) => a[0] - b[0]).map(([pairId, reason]) => ({ pairId, reason }));
}

/** Every resting order, in canonical order (pairs ascending, bids then asks, best first, FIFO). */
export function* restingOrders(s: EngineState): Generator<RestingOrder> {
  for (const book of s.sortedBooks()) {
    for (const node of book.canonicalOrders()) yield toRestingOrder(node);
  }
}

export function restingOrderCount(s: EngineState, pairId?: number): number {
  if (pairId === undefined) return s.orders.resting;
  return s.books.get(pairId)?.orderCount ?? 0;
}

export function getOrder(s: EngineState, orderId: string): RestingOrder | undefined {
  const node = s.orders.get(orderId);
  return node === undefined || node === FINISHED ? undefined : toRestingOrder(node);
}

/** Aggregated top `levels` price levels per side, best first. */
export function depth(s: EngineState, pairId: number, levels: number): Depth {
  const book = s.books.get(pairId);
  const side = (list: PriceLevel[] | undefined, decimals: number): DepthLevel[] => {
    const out: DepthLevel[] = [];
    if (list === undefined) return out;
    for (let i = list.length - 1; i >= 0 && out.length < levels; i--) {
      const level = list[i]!;
      out.push({
        price: level.priceText,
        volume: formatValue(level.total, decimals),
        orders: level.count,
      });
    }
    return out;
  };
  const decimals = book?.amountDecimals ?? 0;
  return { bids: side(book?.bids, decimals), asks: side(book?.asks, decimals) };
}
