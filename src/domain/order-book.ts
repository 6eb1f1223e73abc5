// In-memory order book of one pair: price levels per side, each a FIFO linked list of resting
// orders. Best prices sit at the end of each sorted array so consuming the touch is a pop.

import { addScaled, formatValue, type Scaled, subScaled } from "./decimal-scale";
import { invariant } from "./invariant-error";
import type { LevelDigests } from "./level-digests";
import { StopBook } from "./stop-book";
import type { RestingOrder, Side, StpMode } from "./types";

/** A resting order as the engine holds it: scaled integers plus its place in a level's list. */
export interface OrderNode {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  price: Scaled;
  priceText: string;
  remaining: Scaled;
  /** Canonical text of `remaining`, kept in step with it so snapshots do not re-format. */
  remainingText: string;
  /** The volume the order was accepted (or loaded) with; fills never exceed it. */
  accepted: Scaled;
  volumeTotal: Scaled;
  volumeTotalText: string;
  timestamp: number;
  sequence: number;
  priceDecimals: number;
  amountDecimals: number;
  quoteDecimals: number;
  stp: StpMode;
  /** An amend that would make it trade is refused. */
  postOnly: boolean;
  /** A good-till-date order's deadline, epoch milliseconds; 0 for every other order. */
  expireAt: number;
  /**
   * An iceberg's volume shown at a time (0 for every other order): then `remaining` is the
   * part shown and `hidden` the rest of its unfilled volume (see iceberg.ts).
   */
  display: Scaled;
  hidden: Scaled;
  /** A one-cancels-other leg's list id and the other leg's order id; "" for other orders. */
  listId: string;
  linked: string;
  level: PriceLevel | null;
  /** The order's place in the engine's id index while it rests (-1 otherwise). */
  handle: number;
  prev: OrderNode | null;
  next: OrderNode | null;
}

export interface PriceLevel {
  price: Scaled;
  priceText: string;
  total: Scaled;
  count: number;
  head: OrderNode | null;
  tail: OrderNode | null;
  /** Its place in LevelDigests' list of levels to hash again, or -1. */
  digestMarked: number;
  /** The level's hash as last counted in the books' digest (0 while it counts nothing). */
  digestHigh: number;
  digestLow: number;
}

export function toRestingOrder(node: OrderNode): RestingOrder {
  const order: RestingOrder = {
    id: node.id,
    userId: node.userId,
    pairId: node.pairId,
    side: node.side,
    price: node.priceText,
    volume: node.remainingText,
    volumeTotal: node.volumeTotalText,
    timestamp: node.timestamp,
    sequence: node.sequence,
    priceDecimals: node.priceDecimals,
    amountDecimals: node.amountDecimals,
    quoteDecimals: node.quoteDecimals,
    stp: node.stp,
  };
  // Only when set: every other order keeps the shape (and digest) it always had.
  if (node.postOnly) order.postOnly = true;
  if (node.expireAt !== 0) order.expireAt = node.expireAt;
  if (node.linked !== "") {
    order.listId = node.listId;
    order.linkedOrderId = node.linked;
  }
  if (node.display !== 0) {
    order.displayVolume = formatValue(node.display, node.amountDecimals);
    order.hiddenVolume = node.hidden === 0 ? "0" : formatValue(node.hidden, node.amountDecimals);
  }
  return order;
}

export class PairBook {
  /** Ascending by price: the best (highest) bid is last. */
  readonly bids: PriceLevel[] = [];
  /** Descending by price: the best (lowest) ask is last. */
  readonly asks: PriceLevel[] = [];
  orderCount = 0;
  /** The pair's stop orders, waiting for a trade to trigger them. */
  readonly stops = new StopBook();
  priceDecimals = -1;
  amountDecimals = -1;
  quoteDecimals = -1;
  /**
   * The last level dropped, emptied, for the next new level: a book whose touch empties and
   * refills (a taker clearing it, then a new order there) then allocates no level.
   */
  private spareLevel: PriceLevel | null = null;

  constructor(
    readonly pairId: number,
    /** Told of every change to a level's orders, to keep the books' digest current. */
    private readonly digests: LevelDigests,
  ) {}

  /** A level's orders or their volumes changed (the engine's fills call this too). */
  changed(level: PriceLevel): void {
    if (level.digestMarked < 0) this.digests.mark(level);
  }

  levels(side: Side): PriceLevel[] {
    return side === "bid" ? this.bids : this.asks;
  }

  /** The best level of a side, or undefined when the side is empty. */
  best(side: Side): PriceLevel | undefined {
    const levels = side === "bid" ? this.bids : this.asks;
    return levels[levels.length - 1];
  }

  /** True when the book's resting orders or stops have other precisions than the ones given. */
  precisionDiffers(priceDecimals: number, amountDecimals: number, quoteDecimals: number): boolean {
    if (this.orderCount > 0) {
      return (
        this.priceDecimals !== priceDecimals ||
        this.amountDecimals !== amountDecimals ||
        this.quoteDecimals !== quoteDecimals
      );
    }
    if (this.stops.size === 0) return false;
    const stop = this.stops.bids[0] ?? this.stops.asks[0];
    return (
      stop !== undefined &&
      (stop.priceDecimals !== priceDecimals ||
        stop.amountDecimals !== amountDecimals ||
        stop.quoteDecimals !== quoteDecimals)
    );
  }

  /** No resting order and no stop: the engine may drop the book. */
  get empty(): boolean {
    return this.orderCount === 0 && this.stops.size === 0;
  }

  /** Appends an order at the back of its level's queue, creating the level when needed. */
  insert(node: OrderNode): void {
    if (this.orderCount === 0) {
      this.priceDecimals = node.priceDecimals;
      this.amountDecimals = node.amountDecimals;
      this.quoteDecimals = node.quoteDecimals;
    }
    const levels = node.side === "bid" ? this.bids : this.asks;
    const level = this.findOrCreateLevel(levels, node.side, node.price, node.priceText);
    node.level = level;
    node.prev = level.tail;
    node.next = null;
    if (level.tail === null) level.head = node;
    else level.tail.next = node;
    level.tail = node;
    level.total = addScaled(level.total, node.remaining);
    level.count++;
    this.orderCount++;
    if (level.digestMarked < 0) this.digests.mark(level);
  }

  /**
   * Inserts a loaded order at its sequence position inside the level, so a datastore that returns
   * orders in any order still rebuilds FIFO priority.
   */
  insertBySequence(node: OrderNode): void {
    this.insert(node);
    const level = node.level!;
    let before = node.prev;
    // Equal sequences (a datastore that holds two) keep their arrival order.
    if (before === null || before.sequence <= node.sequence) return;
    // Unlink from the tail and walk back to the first order with a smaller sequence.
    level.tail = before;
    before.next = null;
    while (before !== null && before.sequence > node.sequence) before = before.prev;
    node.prev = before;
    node.next = before === null ? level.head : before.next;
    if (before === null) level.head = node;
    else before.next = node;
    node.next!.prev = node;
  }

  /** Unlinks an order from its level and drops the level once it is empty. */
  remove(node: OrderNode): void {
    const level = node.level;
    invariant(level !== null, () => `order ${node.id} is not in a level`);
    if (node.prev === null) level.head = node.next;
    else node.prev.next = node.next;
    if (node.next === null) level.tail = node.prev;
    else node.next.prev = node.prev;
    level.total = subScaled(level.total, node.remaining);
    level.count--;
    if (level.digestMarked < 0) this.digests.mark(level);
    invariant(level.total >= 0, () => `level ${level.priceText} total went negative`);
    node.level = null;
    node.prev = null;
    node.next = null;
    this.orderCount--;
    if (level.count === 0) this.dropLevel(node.side, level);
  }

  private dropLevel(side: Side, level: PriceLevel): void {
    invariant(level.total === 0, () => `empty level ${level.priceText} has volume`);
    const levels = side === "bid" ? this.bids : this.asks;
    const last = levels.length - 1;
    // Most removals are at the touch, so check the end before searching.
    if (levels[last] === level) {
      levels.pop();
    } else {
      const index = this.search(levels, side, level.price);
      invariant(levels[index] === level, () => `level ${level.priceText} missing from ${side}s`);
      levels.splice(index, 1);
    }
    // Empty already (count 0, total 0, no orders), so it can stand in for the next new level.
    level.head = null;
    level.tail = null;
    this.digests.dropped(level);
    this.spareLevel = level;
  }

  private findOrCreateLevel(
    levels: PriceLevel[],
    side: Side,
    price: Scaled,
    priceText: string,
  ): PriceLevel {
    const last = levels[levels.length - 1];
    if (last !== undefined && last.price === price) return last;
    const index = this.search(levels, side, price);
    const found = levels[index];
    if (found !== undefined && found.price === price) return found;
    let level = this.spareLevel;
    if (level === null) {
      level = {
        price,
        priceText,
        total: 0,
        count: 0,
        head: null,
        tail: null,
        digestMarked: -1,
        digestHigh: 0,
        digestLow: 0,
      };
    } else {
      this.spareLevel = null;
      level.price = price;
      level.priceText = priceText;
    }
    if (index === levels.length) levels.push(level);
    else levels.splice(index, 0, level);
    return level;
  }

  /** First index whose level is not before `price` in the side's array order. */
  private search(levels: PriceLevel[], side: Side, price: Scaled): number {
    let low = 0;
    let high = levels.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const p = levels[mid]!.price;
      const before = side === "bid" ? p < price : p > price;
      if (before) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  /** Orders in canonical order: bids best first, then asks best first, FIFO within a level. */
  *canonicalOrders(): Generator<OrderNode> {
    for (const levels of [this.bids, this.asks]) {
      for (let i = levels.length - 1; i >= 0; i--) {
        for (let node = levels[i]!.head; node !== null; node = node.next) yield node;
      }
    }
  }

  /** Validates the whole book; returns the number of orders seen for the engine's index check. */
  check(): number {
    let seen = 0;
    for (const side of ["bid", "ask"] as const) {
      const levels = this.levels(side);
      for (let i = 0; i < levels.length; i++) {
        const level = levels[i]!;
        if (i > 0) {
          const previous = levels[i - 1]!.price;
          const ordered = side === "bid" ? previous < level.price : previous > level.price;
          invariant(ordered, () => `${side} levels out of order at ${level.priceText}`);
        }
        invariant(level.count > 0 && level.head !== null, () => `empty ${side} level kept`);
        let total: Scaled = 0;
        let count = 0;
        let lastSequence = -1;
        let prev: OrderNode | null = null;
        for (let node: OrderNode | null = level.head; node !== null; node = node.next) {
          invariant(
            node.level === level && node.prev === prev,
            () => `order ${node?.id} badly linked`,
          );
          invariant(
            node.side === side && node.price === level.price,
            () => `order ${node?.id} misplaced`,
          );
          invariant(node.pairId === this.pairId, () => `order ${node?.id} in wrong pair`);
          invariant(node.sequence > lastSequence, () => `FIFO broken at order ${node?.id}`);
          invariant(node.remaining > 0, () => `order ${node?.id} rests with no volume`);
          invariant(
            node.remaining <= node.accepted,
            () => `order ${node?.id} grew past acceptance`,
          );
          lastSequence = node.sequence;
          total = addScaled(total, node.remaining);
          count++;
          prev = node;
        }
        invariant(level.tail === prev, () => `level ${level.priceText} tail wrong`);
        invariant(level.total === total, () => `level ${level.priceText} total != sum of orders`);
        invariant(level.count === count, () => `level ${level.priceText} count wrong`);
        seen += count;
      }
    }
    const bestBid = this.best("bid");
    const bestAsk = this.best("ask");
    invariant(
      bestBid === undefined || bestAsk === undefined || bestBid.price < bestAsk.price,
      () => `pair ${this.pairId} book is crossed`,
    );
    invariant(seen === this.orderCount, () => `pair ${this.pairId} order count drifted`);
    return seen;
  }
}
