/**
 * Every stream of one pair: the book at each depth asked for, L3 and trades. A change set is
 * turned into one message per stream, each built once and sent to all of its subscribers.
 */

import type { ChangeSet, FeedBook, Trade } from "./feed-book";
import {
  type BookDepth,
  bookSnapshot,
  bookUpdate,
  checksumOf,
  l3Snapshot,
  l3Update,
  type SentLevels,
  sentLevels,
  sideUpdate,
  tradesInSnapshot,
  tradesSnapshot,
  tradesUpdate,
} from "./messages";
import { type Broadcast, FeedStream } from "./streams";

interface DepthStream {
  stream: FeedStream;
  sent: { bid: SentLevels; ask: SentLevels };
  /** When its last subscriber left (performance.now()), while it has none. */
  emptySince?: number;
}

/**
 * How long a depth stream nobody reads is kept: long enough for a client that lost its
 * connection to resume, short enough that deep streams left behind (a client gone, or cut off)
 * stop costing a diff of their depth at every change.
 */
export const idleDepthStreamMs = 5000;

export class PairStreams {
  private readonly depths = new Map<BookDepth, DepthStream>();
  readonly l3: FeedStream;
  readonly trades: FeedStream;
  /** The last trades, for a trades snapshot. */
  private readonly lastTrades: Trade[] = [];

  constructor(
    private book: FeedBook,
    private readonly keep: number,
    private readonly broadcast: Broadcast,
  ) {
    this.l3 = new FeedStream(book.seq, keep, broadcast);
    this.trades = new FeedStream(book.seq, keep, broadcast);
  }

  /** The stream of the book at `depth`, started from the book as it is now. */
  depth(depth: BookDepth): FeedStream {
    let entry = this.depths.get(depth);
    if (entry === undefined) {
      entry = {
        stream: new FeedStream(this.book.seq, this.keep, this.broadcast),
        sent: this.sentNow(depth),
      };
      this.depths.set(depth, entry);
    }
    return entry.stream;
  }

  publish(set: ChangeSet, now = performance.now()): void {
    const checksum = checksumOf(this.book);
    for (const [depth, entry] of this.depths) {
      if (this.dropIdle(depth, entry, now)) continue;
      const { stream, sent } = entry;
      stream.publish(set.seq, (prevSeq) => {
        const bids = sideUpdate(this.book, "bid", depth, set.levels.bid, sent.bid);
        const asks = sideUpdate(this.book, "ask", depth, set.levels.ask, sent.ask);
        return JSON.stringify(bookUpdate(set, depth, prevSeq, bids, asks, checksum));
      });
    }
    this.l3.publish(set.seq, (prevSeq) => JSON.stringify(l3Update(set, prevSeq, checksum)));
    if (set.trades.length === 0) return;
    this.lastTrades.push(...set.trades);
    if (this.lastTrades.length > 2 * tradesInSnapshot) this.lastTrades.splice(0, tradesInSnapshot);
    this.trades.publish(set.seq, (prevSeq) => JSON.stringify(tradesUpdate(set, prevSeq)));
  }

  /** True when no stream of the pair has a subscriber. */
  unread(): boolean {
    return this.streams().every(({ stream }) => stream.subscribers.size === 0);
  }

  /** Forgets a depth stream nobody has read for idleDepthStreamMs; true when it did. */
  private dropIdle(depth: BookDepth, entry: DepthStream, now: number): boolean {
    if (entry.stream.subscribers.size > 0) {
      entry.emptySince = undefined;
      return false;
    }
    entry.emptySince ??= now;
    if (now - entry.emptySince < idleDepthStreamMs) return false;
    this.depths.delete(depth);
    return true;
  }

  snapshot(channel: "book" | "l3" | "trades", depth: BookDepth): Record<string, unknown> {
    if (channel === "l3") return l3Snapshot(this.book, this.l3.lastSeq);
    if (channel === "trades")
      return tradesSnapshot(this.book.pairId, this.lastTrades, this.trades.lastSeq);
    return bookSnapshot(this.book, depth, this.depth(depth).lastSeq);
  }

  /**
   * The feed rebuilt its books (a new snapshot after its event source was lost): every stream
   * starts again from the new book, and what it kept chains to nothing any more.
   */
  replaceBook(book: FeedBook): void {
    this.book = book;
    for (const [depth, entry] of this.depths) {
      entry.stream.reset(book.seq);
      entry.sent = this.sentNow(depth);
    }
    this.l3.reset(book.seq);
    this.trades.reset(book.seq);
  }

  /** Every stream with its subscribers, for a resynchronisation or a disconnect. */
  streams(): { channel: "book" | "l3" | "trades"; depth: BookDepth; stream: FeedStream }[] {
    return [
      ...[...this.depths].map(([depth, entry]) => ({
        channel: "book" as const,
        depth,
        stream: entry.stream,
      })),
      { channel: "l3", depth: "all", stream: this.l3 },
      { channel: "trades", depth: "all", stream: this.trades },
    ];
  }

  private sentNow(depth: BookDepth): { bid: SentLevels; ask: SentLevels } {
    const top = depth === "all" ? undefined : depth;
    return { bid: sentLevels(this.book.bids.top(top)), ask: sentLevels(this.book.asks.top(top)) };
  }
}
