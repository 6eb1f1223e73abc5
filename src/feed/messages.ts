/**
 * The feed's messages, built from a pair's book and its change sets: snapshots and updates of
 * the book (at a depth), of the orders (L3) and of the trades. docs/marketdata.md shows each.
 */

import { bookChecksum, checksumLevels } from "./checksum";
import type { ChangeSet, FeedBook, Trade } from "./feed-book";
import type { LevelView } from "./price-levels";

/** Depths a book subscription may ask for; "all" is every level. */
export const bookDepths = [10, 25, 100, 500, "all"] as const;
export type BookDepth = (typeof bookDepths)[number];

export type Channel = "book" | "l3" | "trades";

/** Trades a trades snapshot holds at most. */
export const tradesInSnapshot = 50;

export function checksumOf(book: FeedBook): number {
  return bookChecksum(book.bids.top(checksumLevels), book.asks.top(checksumLevels));
}

const limit = (depth: BookDepth): number | undefined => (depth === "all" ? undefined : depth);

function haltFields(book: FeedBook): Record<string, unknown> {
  return book.halted ? { halted: true, haltReason: book.haltReason } : { halted: false };
}

export function bookSnapshot(
  book: FeedBook,
  depth: BookDepth,
  seq: number,
): Record<string, unknown> {
  return {
    channel: "book",
    type: "snapshot",
    pairId: book.pairId,
    depth,
    seq,
    bids: book.bids.top(limit(depth)),
    asks: book.asks.top(limit(depth)),
    checksum: checksumOf(book),
    ...haltFields(book),
  };
}

export function l3Snapshot(book: FeedBook, seq: number): Record<string, unknown> {
  return {
    channel: "l3",
    type: "snapshot",
    pairId: book.pairId,
    seq,
    bids: book.bids.orders(),
    asks: book.asks.orders(),
    checksum: checksumOf(book),
    ...haltFields(book),
  };
}

export function tradesSnapshot(pairId: number, trades: readonly Trade[], seq: number) {
  return {
    channel: "trades",
    type: "snapshot",
    pairId,
    seq,
    trades: trades.slice(-tradesInSnapshot),
  };
}

/**
 * What a depth stream last sent of one side: price to the level's view. A level's view is
 * made anew at each change of it (PriceLevels), so an unchanged level is the same object.
 */
export type SentLevels = Map<string, LevelView>;

export function sentLevels(levels: readonly LevelView[]): SentLevels {
  return new Map(levels.map((level) => [level.price, level]));
}

/**
 * The levels of one side a subscriber at `depth` must apply: every level of its top that
 * changed or entered it, and every level that left it with volume "0" (so no truncation is
 * needed). Updates `sent` to the new top. `sent` held the top before the change set and
 * `changed` names every price the change set touched, so the work is in proportion to the
 * change, not the depth: only changed levels, and unchanged ones at the top's edge, can differ.
 */
export function sideUpdate(
  book: FeedBook,
  side: "bid" | "ask",
  depth: BookDepth,
  changed: ReadonlySet<string>,
  sent: SentLevels,
): LevelView[] {
  const levels = book.side(side);
  if (depth === "all") {
    return [...changed].map((price) => levels.level(price) ?? { price, volume: "0", orders: 0 });
  }
  const out: LevelView[] = [];
  for (const price of changed) {
    const rank = levels.rank(price);
    const level = rank >= 0 && rank < depth ? levels.at(rank)! : undefined;
    if (level !== undefined) {
      if (sent.get(price) !== level) {
        out.push(level);
        sent.set(price, level);
      }
    } else if (sent.delete(price)) {
      out.push({ price, volume: "0", orders: 0 });
    }
  }
  // Unchanged levels that crossed the edge: pushed out by levels added above them, or pulled
  // in by levels removed above them. Both at once cannot happen: unchanged levels keep their
  // order, and one that entered ranks below one that left.
  const size = Math.min(depth, levels.size);
  for (let rank = depth; sent.size > size && rank < levels.size; rank++) {
    const price = levels.at(rank)!.price;
    if (sent.delete(price)) out.push({ price, volume: "0", orders: 0 });
  }
  for (let rank = size - 1; sent.size < size && rank >= 0; rank--) {
    const level = levels.at(rank)!;
    if (sent.has(level.price)) continue;
    out.push(level);
    sent.set(level.price, level);
  }
  return out;
}

export function bookUpdate(
  set: ChangeSet,
  depth: BookDepth,
  prevSeq: number,
  bids: LevelView[],
  asks: LevelView[],
  checksum: number,
): Record<string, unknown> {
  const message: Record<string, unknown> = {
    channel: "book",
    type: "update",
    pairId: set.pairId,
    depth,
    seq: set.seq,
    prevSeq,
    bids,
    asks,
    checksum,
  };
  if (set.halted !== undefined) message.halted = set.halted;
  return message;
}

export function l3Update(
  set: ChangeSet,
  prevSeq: number,
  checksum: number,
): Record<string, unknown> {
  const message: Record<string, unknown> = {
    channel: "l3",
    type: "update",
    pairId: set.pairId,
    seq: set.seq,
    prevSeq,
    orders: set.orders,
    checksum,
  };
  if (set.halted !== undefined) message.halted = set.halted;
  return message;
}

export function tradesUpdate(set: ChangeSet, prevSeq: number): Record<string, unknown> {
  return {
    channel: "trades",
    type: "update",
    pairId: set.pairId,
    seq: set.seq,
    prevSeq,
    trades: set.trades,
  };
}
