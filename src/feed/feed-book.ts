/**
 * One pair's book as the feed keeps it, rebuilt from the partition's events in sequence order:
 * resting orders by price and queue position, trades, the halt. Each event's changes collect
 * in a change set until flush(), which the feed calls at the end of each command's events.
 */

import type { Side } from "../domain/types";
import { canonicalDecimal, parseDecimal } from "./decimal-text";
import { PriceLevels } from "./price-levels";

/** What the feed reads of an event envelope. */
export interface FeedEvent {
  type: string;
  pairId: number;
  commandId: string;
  payload: Record<string, unknown>;
  /** The last event its command's commit wrote (the outbox's `x-command-last` header). */
  commandLast?: boolean;
}

/** An L3 change: `add` puts the order at the back of its level; `change` keeps its place. */
export interface OrderChange {
  action: "add" | "change" | "remove";
  orderId: string;
  side: Side;
  price: string;
  volume: string;
}

export interface Trade {
  /** The partition sequence number of the deal's event. */
  seq: number;
  price: string;
  volume: string;
  quoteVolume: string;
  /** The side of the order that took liquidity. */
  takerSide: Side;
  timestamp: number;
}

/** Everything one command (or the part of it seen so far) changed in one pair's book. */
export interface ChangeSet {
  pairId: number;
  /** The sequence number of the set's last event: the book's sequence after it. */
  seq: number;
  /** The book's sequence before it: the previous set's seq, or the snapshot's. */
  prevSeq: number;
  /** Prices of the levels that changed, per side. */
  levels: { bid: Set<string>; ask: Set<string> };
  orders: OrderChange[];
  trades: Trade[];
  /** Set when the set halted or resumed the pair. */
  halted?: boolean;
}

interface Resting {
  side: Side;
  price: string;
}

/** A bad payload field: the event is not one the outbox publishes. */
export class BadEventError extends Error {}

function text(payload: Record<string, unknown>, field: string): string {
  const value = payload[field];
  if (typeof value !== "string") throw new BadEventError(`payload field ${field} is not a string`);
  return value;
}

function side(payload: Record<string, unknown>, field = "side"): Side {
  const value = payload[field];
  if (value !== "bid" && value !== "ask")
    throw new BadEventError(`payload field ${field} is not a side`);
  return value;
}

export class FeedBook {
  readonly bids = new PriceLevels("bid");
  readonly asks = new PriceLevels("ask");
  private readonly resting = new Map<string, Resting>();
  halted = false;
  haltReason: string | undefined;
  private pending: ChangeSet | undefined;
  private applied = false;

  /** `seq`: the partition sequence number the book reflects (its snapshot's, at first). */
  constructor(
    readonly pairId: number,
    public seq: number,
  ) {}

  /** True while no event, snapshot order or halt has reached the book: it holds nothing. */
  get untouched(): boolean {
    return !this.applied && !this.halted && this.resting.size === 0;
  }

  /** Applies one event numbered `seq`; book-neutral events change nothing. */
  apply(event: FeedEvent, seq: number): void {
    this.applied = true;
    const p = event.payload;
    switch (event.type) {
      case "order.rested.v1":
        this.rest(text(p, "orderId"), side(p), text(p, "price"), text(p, "volume"), seq);
        break;
      case "order.updated.v1":
        this.reduce(text(p, "orderId"), text(p, "volume"), seq);
        break;
      case "order.filled.v1":
      case "order.cancelled.v1":
      case "order.expired.v1":
        this.take(text(p, "orderId"), seq);
        break;
      case "order.amended.v1":
        this.amend(p, seq);
        break;
      case "deal.executed.v1":
        this.trade(p, seq);
        break;
      case "pair.halted.v1":
      case "pair.resumed.v1":
        this.halted = event.type === "pair.halted.v1";
        this.haltReason = this.halted ? text(p, "reason") : undefined;
        this.changes(seq).halted = this.halted;
        break;
    }
  }

  /** Closes the change set being collected: undefined when nothing changed since the last. */
  flush(): ChangeSet | undefined {
    const set = this.pending;
    this.pending = undefined;
    return set;
  }

  side(s: Side): PriceLevels {
    return s === "bid" ? this.bids : this.asks;
  }

  /** An order's place on the book (side and price), or undefined when it does not rest. */
  restingOrder(orderId: string): Resting | undefined {
    return this.resting.get(orderId);
  }

  /** Loads an order resting at the snapshot, behind those loaded before it at its price. */
  load(orderId: string, s: Side, price: string, volume: string): void {
    const at = canonicalDecimal(price);
    this.resting.set(orderId, { side: s, price: at });
    this.side(s).add(orderId, at, parseDecimal(volume));
  }

  private changes(seq: number): ChangeSet {
    this.pending ??= {
      pairId: this.pairId,
      seq,
      prevSeq: this.seq,
      levels: { bid: new Set(), ask: new Set() },
      orders: [],
      trades: [],
    };
    this.pending.seq = seq;
    this.seq = seq;
    return this.pending;
  }

  /** A rested order goes to the back of its level, also one that rested before (an amend's re-match). */
  private rest(orderId: string, s: Side, price: string, volume: string, seq: number): void {
    if (this.resting.has(orderId)) this.take(orderId, seq);
    const at = canonicalDecimal(price);
    this.resting.set(orderId, { side: s, price: at });
    this.side(s).add(orderId, at, parseDecimal(volume));
    this.record(seq, {
      action: "add",
      orderId,
      side: s,
      price: at,
      volume: canonicalDecimal(volume),
    });
  }

  /** Notes an order's change, and its level's, in the change set of `seq`. */
  private record(seq: number, change: OrderChange): void {
    const set = this.changes(seq);
    set.levels[change.side].add(change.price);
    set.orders.push(change);
  }

  /** A resting order partly filled: its remaining volume, in place. Takers are not on the book. */
  private reduce(orderId: string, volume: string, seq: number): void {
    const order = this.resting.get(orderId);
    if (order === undefined) return;
    if (parseDecimal(volume) === 0n) {
      this.take(orderId, seq);
      return;
    }
    this.side(order.side).setVolume(orderId, order.price, parseDecimal(volume));
    this.record(seq, { action: "change", orderId, ...order, volume: canonicalDecimal(volume) });
  }

  private take(orderId: string, seq: number): void {
    const order = this.resting.get(orderId);
    if (order === undefined) return;
    this.resting.delete(orderId);
    this.side(order.side).remove(orderId, order.price);
    this.record(seq, { action: "remove", orderId, ...order, volume: "0" });
  }

  /** An amend keeps the order's place when `priorityKept`, else sends it to the back of its new level. */
  private amend(p: Record<string, unknown>, seq: number): void {
    const orderId = text(p, "orderId");
    const order = this.resting.get(orderId);
    if (order === undefined) return;
    const after = p.after as Record<string, unknown> | undefined;
    if (after === undefined || typeof after !== "object")
      throw new BadEventError("payload field after is missing");
    const price = canonicalDecimal(text(after, "price"));
    const volume = text(after, "volume");
    if (p.priorityKept === true && price === order.price) {
      this.reduce(orderId, volume, seq);
      return;
    }
    this.take(orderId, seq);
    // A volume equal to the executed one finishes the order: its cancel follows; nothing rests.
    if (parseDecimal(volume) > 0n) this.rest(orderId, order.side, price, volume, seq);
  }

  private trade(p: Record<string, unknown>, seq: number): void {
    const timestamp = p.timestamp;
    this.changes(seq).trades.push({
      seq,
      price: text(p, "price"),
      volume: text(p, "volume"),
      quoteVolume: text(p, "quoteVolume"),
      takerSide: side(p, "takerSide"),
      timestamp: typeof timestamp === "number" ? timestamp : 0,
    });
  }
}
