/**
 * Every stream of one pair that someone reads: the book at each depth asked for, L3 and
 * trades. A change set is turned into one message per stream, each built once and sent to
 * all of its subscribers. A stream nobody has read for a while is dropped, and made again
 * from the book as it is when someone subscribes.
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

interface KeptStream {
  stream: FeedStream;
  /** When its last subscriber left (performance.now()), while it has none. */
  emptySince?: number;
}

interface DepthStream extends KeptStream {
  sent: { bid: SentLevels; ask: SentLevels };
}

/** The streams of a pair other than its book's. */
export type OtherChannel = "l3" | "trades";

/**
 * How long a stream nobody reads is kept: long enough for a client that lost its connection
 * to resume, short enough that streams left behind (a client gone, or cut off) stop costing a
 * message at every change (and a diff of their depth, for a deep book stream).
 */
export const idleStreamMs = 5000;

export class PairStreams {
  private readonly depths = new Map<BookDepth, DepthStream>();
  private readonly others = new Map<OtherChannel, KeptStream>();
  /** The last trades, for a trades snapshot. */
  private readonly lastTrades: Trade[] = [];

  constructor(
    private book: FeedBook,
    private readonly keep: number,
    private readonly broadcast: Broadcast,
  ) {}

  /** The pair's L3 or trades stream, started from the book as it is now if nobody read it. */
  other(channel: OtherChannel): FeedStream {
    let entry = this.others.get(channel);
    if (entry === undefined) {
      entry = { stream: new FeedStream(this.book.seq, this.keep, this.broadcast) };
      this.others.set(channel, entry);
    }
    return entry.stream;
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
      if (idle(entry, now)) {
        this.depths.delete(depth);
        continue;
      }
      const { stream, sent } = entry;
      stream.publish(set.seq, (prevSeq) => {
        const bids = sideUpdate(this.book, "bid", depth, set.levels.bid, sent.bid);
        const asks = sideUpdate(this.book, "ask", depth, set.levels.ask, sent.ask);
        return JSON.stringify(bookUpdate(set, depth, prevSeq, bids, asks, checksum));
      });
    }
    this.live("l3", now)?.publish(set.seq, (prevSeq) =>
      JSON.stringify(l3Update(set, prevSeq, checksum)),
    );
    const trades = this.live("trades", now);
    if (set.trades.length === 0) return;
    this.lastTrades.push(...set.trades);
    if (this.lastTrades.length > 2 * tradesInSnapshot) this.lastTrades.splice(0, tradesInSnapshot);
    trades?.publish(set.seq, (prevSeq) => JSON.stringify(tradesUpdate(set, prevSeq)));
  }

  /** The L3 or trades stream while someone reads it or lately did; undefined (dropped) else. */
  private live(channel: OtherChannel, now: number): FeedStream | undefined {
    const entry = this.others.get(channel);
    if (entry === undefined) return undefined;
    if (!idle(entry, now)) return entry.stream;
    this.others.delete(channel);
    return undefined;
  }

  /** True when no stream of the pair has a subscriber. */
  unread(): boolean {
    return this.streams().every(({ stream }) => stream.subscribers.size === 0);
  }

  snapshot(channel: "book" | OtherChannel, depth: BookDepth): Record<string, unknown> {
    if (channel === "l3") return l3Snapshot(this.book, this.other("l3").lastSeq);
    if (channel === "trades")
      return tradesSnapshot(this.book.pairId, this.lastTrades, this.other("trades").lastSeq);
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
    for (const { stream } of this.others.values()) stream.reset(book.seq);
  }

  /** Every stream with its subscribers, for a resynchronisation or a disconnect. */
  streams(): { channel: "book" | "l3" | "trades"; depth: BookDepth; stream: FeedStream }[] {
    return [
      ...[...this.depths].map(([depth, entry]) => ({
        channel: "book" as const,
        depth,
        stream: entry.stream,
      })),
      ...[...this.others].map(([channel, { stream }]) => ({
        channel,
        depth: "all" as const,
        stream,
      })),
    ];
  }

  private sentNow(depth: BookDepth): { bid: SentLevels; ask: SentLevels } {
    const top = depth === "all" ? undefined : depth;
    return { bid: sentLevels(this.book.bids.top(top)), ask: sentLevels(this.book.asks.top(top)) };
  }
}

/** True when nobody has read the stream for idleStreamMs (it is to be dropped). */
function idle(entry: KeptStream, now: number): boolean {
  if (entry.stream.subscribers.size > 0) {
    entry.emptySince = undefined;
    return false;
  }
  entry.emptySince ??= now;
  return now - entry.emptySince >= idleStreamMs;
}
