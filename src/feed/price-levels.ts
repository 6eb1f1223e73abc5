/**
 * One side of a feed book: price levels best first, each with its orders in queue order (a
 * Map keeps insertion order: an order added goes to the back), volumes exact.
 */

import type { Side } from "../domain/types";
import { formatDecimal, parseDecimal } from "./decimal-text";

/** A price level as the feed sends it. */
export interface LevelView {
  price: string;
  /** Total volume resting at the price. */
  volume: string;
  orders: number;
}

/** A resting order as the L3 feed sends it: no user id, the book is public. */
export interface OrderView {
  orderId: string;
  price: string;
  volume: string;
}

interface Level {
  price: string;
  key: bigint;
  volume: bigint;
  /** Order id to remaining volume, in queue order. */
  orders: Map<string, bigint>;
  /**
   * The level as sent, made once per change: a deep subscription's diff then compares views
   * by identity instead of formatting every level's volume at every change.
   */
  view?: LevelView;
}

export class PriceLevels {
  /** Levels best first: bids by price descending, asks ascending. */
  private readonly sorted: Level[] = [];
  private readonly byPrice = new Map<string, Level>();

  constructor(readonly side: Side) {}

  get size(): number {
    return this.sorted.length;
  }

  /** Appends an order at the back of its level's queue. */
  add(orderId: string, price: string, volume: bigint): void {
    let level = this.byPrice.get(price);
    if (level === undefined) {
      level = { price, key: parseDecimal(price), volume: 0n, orders: new Map() };
      this.byPrice.set(price, level);
      this.sorted.splice(this.position(level.key), 0, level);
    }
    level.orders.set(orderId, volume);
    level.volume += volume;
    level.view = undefined;
  }

  /** Sets a resting order's volume in place: it keeps its place in the queue. */
  setVolume(orderId: string, price: string, volume: bigint): void {
    const level = this.byPrice.get(price);
    const before = level?.orders.get(orderId);
    if (level === undefined || before === undefined) return;
    level.orders.set(orderId, volume);
    level.volume += volume - before;
    level.view = undefined;
  }

  remove(orderId: string, price: string): void {
    const level = this.byPrice.get(price);
    const volume = level?.orders.get(orderId);
    if (level === undefined || volume === undefined) return;
    level.orders.delete(orderId);
    level.volume -= volume;
    level.view = undefined;
    if (level.orders.size > 0) return;
    this.byPrice.delete(price);
    this.sorted.splice(this.position(level.key), 1);
  }

  /** The level at `price`, or undefined when nothing rests there. */
  level(price: string): LevelView | undefined {
    const level = this.byPrice.get(price);
    return level === undefined ? undefined : view(level);
  }

  /** The best `depth` levels (every level when depth is undefined), best first. */
  top(depth?: number): LevelView[] {
    const count = depth === undefined ? this.sorted.length : Math.min(depth, this.sorted.length);
    const out: LevelView[] = [];
    for (let i = 0; i < count; i++) out.push(view(this.sorted[i]!));
    return out;
  }

  /** Every resting order, best level first, queue order within a level. */
  orders(): OrderView[] {
    const out: OrderView[] = [];
    for (let i = 0; i < this.sorted.length; i++) {
      const level = this.sorted[i]!;
      for (const [orderId, volume] of level.orders) {
        out.push({ orderId, price: level.price, volume: formatDecimal(volume) });
      }
    }
    return out;
  }

  /** The rank of the level at `price` (0 = the best), or -1 when nothing rests there. */
  rank(price: string): number {
    const level = this.byPrice.get(price);
    return level === undefined ? -1 : this.position(level.key);
  }

  /** The level at `rank` (0 = the best), or undefined past the last. */
  at(rank: number): LevelView | undefined {
    const level = this.sorted[rank];
    return level === undefined ? undefined : view(level);
  }

  /** True when `price` ranks among the best `depth` levels (or would, were it resting). */
  withinDepth(price: string, depth: number): boolean {
    return this.position(parseDecimal(price)) < depth;
  }

  /** Index of the level with `key` in sorted, or where it would be inserted. */
  private position(key: bigint): number {
    let low = 0;
    let high = this.sorted.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const at = this.sorted[mid]!.key;
      const before = this.side === "bid" ? at > key : at < key;
      if (before) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}

function view(level: Level): LevelView {
  level.view ??= {
    price: level.price,
    volume: formatDecimal(level.volume),
    orders: level.orders.size,
  };
  return level.view;
}
