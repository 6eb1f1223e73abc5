// A pure FNV-1a 64-bit hash and the canonical serialisation of resting orders it is fed, so the
// engine and any other book (the test oracle, a reloaded engine) can agree on one state hash.

import type { HaltedPair, Side, StopOrder, StpMode } from "./types";

/** FNV-1a 64 over bytes, kept in four 16-bit limbs so every step stays exact in doubles. */
export class Fnv1a64 {
  private h0 = 0x2325;
  private h1 = 0x8422;
  private h2 = 0x9ce4;
  private h3 = 0xcbf2;

  byte(value: number): void {
    this.h0 ^= value & 0xff;
    // Multiply by the FNV prime 2^40 + 0x1b3: the 0x1b3 part limb by limb, the 2^40 part as a
    // shift of the two low limbs into the two high ones, then propagate carries.
    const t0 = this.h0 * 0x1b3;
    const t1 = this.h1 * 0x1b3;
    let t2 = this.h2 * 0x1b3 + (this.h0 << 8);
    let t3 = this.h3 * 0x1b3 + (this.h1 << 8);
    const c1 = t1 + (t0 >>> 16);
    this.h0 = t0 & 0xffff;
    t2 += c1 >>> 16;
    this.h1 = c1 & 0xffff;
    t3 += t2 >>> 16;
    this.h2 = t2 & 0xffff;
    this.h3 = t3 & 0xffff;
  }

  /**
   * Hashes a string so that no two lists of strings give one byte stream: its length in
   * UTF-16 units (four bytes), then every unit as two bytes. (A separator byte after each
   * string, as before, let an id that contained it pass for two fields, and a character
   * above 0xff for three bytes of others: two different books, one digest.)
   */
  text(value: string): void {
    const length = value.length;
    this.byte(length >>> 24);
    this.byte(length >>> 16);
    this.byte(length >>> 8);
    this.byte(length);
    for (let i = 0; i < length; i++) {
      const c = value.charCodeAt(i);
      this.byte(c >>> 8);
      this.byte(c);
    }
  }

  /** The high and low 32 bits of the hash. */
  high(): number {
    return ((this.h3 << 16) | this.h2) >>> 0;
  }

  low(): number {
    return ((this.h1 << 16) | this.h0) >>> 0;
  }

  hex(): string {
    return [this.h3, this.h2, this.h1, this.h0]
      .map((limb) => limb.toString(16).padStart(4, "0"))
      .join("");
  }
}

/** The fields of a resting order that define book state; sequence numbers are deliberately absent. */
export interface DigestOrder {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  price: string;
  volume: string;
  volumeTotal: string;
  timestamp: number;
  stp: StpMode;
  /** The pair's precisions: books that differ only in them accept different orders next. */
  priceDecimals: number;
  amountDecimals: number;
  quoteDecimals: number;
  /** Hashed only when true, so books without post-only orders hash as they always did. */
  postOnly?: boolean;
  /** Hashed only when present, for the same reason. */
  expireAt?: number;
  /** An iceberg's: hashed only when present, as above. */
  displayVolume?: string;
  hiddenVolume?: string;
  /** A one-cancels-other leg's: hashed only when present, as above. */
  listId?: string;
  linkedOrderId?: string;
}

/** Feeds one order's defining fields to a hash. */
export function hashOrder(hash: Fnv1a64, order: DigestOrder): void {
  hash.text(String(order.pairId));
  hash.text(order.side);
  hash.text(order.id);
  hash.text(order.userId);
  hash.text(order.price);
  hash.text(order.volume);
  hash.text(order.volumeTotal);
  hash.text(String(order.timestamp));
  hash.text(order.stp);
  hash.text(`${order.priceDecimals}/${order.amountDecimals}/${order.quoteDecimals}`);
  if (order.postOnly === true) hash.text("post-only");
  if (order.expireAt !== undefined) hash.text(`expires ${order.expireAt}`);
  if (order.displayVolume !== undefined) {
    hash.text(`iceberg ${order.displayVolume}/${order.hiddenVolume ?? "0"}`);
  }
  if (order.linkedOrderId !== undefined) hashLink(hash, order.listId ?? "", order.linkedOrderId);
}

function hashLink(hash: Fnv1a64, listId: string, linked: string): void {
  hash.text("oco");
  hash.text(listId);
  hash.text(linked);
}

/** The fields of a stop order that define state; its arrival order counts through the list. */
export type DigestStop = Omit<StopOrder, "sequence">;

function hashStop(hash: Fnv1a64, stop: DigestStop): void {
  hash.text("stop");
  hash.text(String(stop.pairId));
  hash.text(stop.side);
  hash.text(stop.id);
  hash.text(stop.userId);
  hash.text(stop.type);
  hash.text(stop.price);
  hash.text(stop.stopPrice);
  hash.text(stop.volume);
  hash.text(stop.volumeTotal);
  hash.text(stop.quoteVolume);
  hash.text(stop.timeInForce);
  hash.text(stop.stp);
  hash.text(String(stop.timestamp));
  hash.text(`${stop.priceDecimals}/${stop.amountDecimals}/${stop.quoteDecimals}`);
  if (stop.expireAt !== undefined) hash.text(`expires ${stop.expireAt}`);
  if (stop.linkedOrderId !== undefined) hashLink(hash, stop.listId ?? "", stop.linkedOrderId);
}

/**
 * Adds the stop books to a digest sum: each pair's stops, given in arrival order (pairs
 * ascending), make one FNV-1a 64 hash, since arrival decides which of two stops triggers first.
 */
export function addStopsDigest(sum: DigestSum, stops: Iterable<DigestStop>): void {
  let hash: Fnv1a64 | null = null;
  let pairId = -1;
  for (const stop of stops) {
    if (stop.pairId !== pairId) {
      if (hash !== null) sum.add(hash.high(), hash.low());
      hash = new Fnv1a64();
      pairId = stop.pairId;
    }
    hashStop(hash!, stop);
  }
  if (hash !== null) sum.add(hash.high(), hash.low());
}

/** Adds each halted pair, with its reason, to a digest sum. */
export function addHaltsDigest(sum: DigestSum, halts: Iterable<HaltedPair>): void {
  for (const halt of halts) {
    const hash = new Fnv1a64();
    hash.text("halt");
    hash.text(String(halt.pairId));
    hash.text(halt.reason);
    sum.add(hash.high(), hash.low());
  }
}

/** Dead-man's switches: armed ones and fired ones still sweeping, each with its deadline. */
export interface DigestSessions {
  switches: Iterable<readonly [userId: string, deadline: number]>;
  sweeps: Iterable<readonly [userId: string, deadline: number]>;
}

/** Adds each switch and sweep to a digest sum (a sum: their order does not matter). */
export function addSessionsDigest(sum: DigestSum, sessions: DigestSessions): void {
  for (const [kind, entries] of [
    ["switch", sessions.switches],
    ["sweep", sessions.sweeps],
  ] as const) {
    for (const [userId, deadline] of entries) {
      const hash = new Fnv1a64();
      hash.text(kind);
      hash.text(userId);
      hash.text(String(deadline));
      sum.add(hash.high(), hash.low());
    }
  }
}

/**
 * A sum of 64-bit values modulo 2^64, in two 32-bit halves. The books' digest is the sum of
 * their price levels' hashes: a sum does not depend on the order its terms come in, so a
 * level that changed can be hashed again alone, and its old hash subtracted.
 */
export class DigestSum {
  hi = 0;
  lo = 0;

  add(hi: number, lo: number): void {
    const low = this.lo + lo;
    const carry = low >= 0x1_0000_0000 ? 1 : 0;
    this.lo = low - carry * 0x1_0000_0000;
    this.hi = (this.hi + hi + carry) >>> 0;
  }

  subtract(hi: number, lo: number): void {
    const low = this.lo - lo;
    const borrow = low < 0 ? 1 : 0;
    this.lo = low + borrow * 0x1_0000_0000;
    this.hi = (this.hi - hi - borrow) >>> 0;
  }

  hex(): string {
    return this.hi.toString(16).padStart(8, "0") + this.lo.toString(16).padStart(8, "0");
  }
}

/**
 * Hashes orders given in canonical order (pairs ascending, bids best first then asks best
 * first, FIFO within a level; prices and volumes canonical decimal text): each price level's
 * orders in FIFO order with FNV-1a 64, and the levels' hashes summed (see DigestSum).
 */
export function digestOrders(orders: Iterable<DigestOrder>): string {
  return digestOrdersSum(orders).hex();
}

/**
 * The whole state's digest: resting orders (canonical order), stops (pairs ascending, arrival
 * order), halted pairs and dead-man's switches. Without the last three it is digestOrders'.
 */
export function digestBooks(
  orders: Iterable<DigestOrder>,
  stops: Iterable<DigestStop>,
  halts: Iterable<HaltedPair>,
  sessions?: DigestSessions,
): string {
  const sum = digestOrdersSum(orders);
  addStopsDigest(sum, stops);
  addHaltsDigest(sum, halts);
  if (sessions !== undefined) addSessionsDigest(sum, sessions);
  return sum.hex();
}

function digestOrdersSum(orders: Iterable<DigestOrder>): DigestSum {
  const sum = new DigestSum();
  let level: Fnv1a64 | null = null;
  let last: DigestOrder | null = null;
  for (const order of orders) {
    const sameLevel =
      last !== null &&
      last.pairId === order.pairId &&
      last.side === order.side &&
      last.price === order.price;
    if (!sameLevel) {
      if (level !== null) sum.add(level.high(), level.low());
      level = new Fnv1a64();
    }
    hashOrder(level!, order);
    last = order;
  }
  if (level !== null) sum.add(level.high(), level.low());
  return sum;
}
