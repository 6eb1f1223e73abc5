/**
 * The books of one partition, kept from its events: a snapshot first (events that arrive
 * meanwhile wait), then every event in `x-partition-sequence` order (a later one waits for
 * a gap to fill, a copy is dropped). Each command's changes are handed on as change sets, at
 * its last event when the outbox marked it so, else at the next command's first event or a
 * millisecond after a burst of arrivals began.
 */

import { type ChangeSet, FeedBook, type FeedEvent } from "./feed-book";
import { Resequencer } from "./resequencer";
import type { PartitionSnapshot } from "./snapshot";

export interface PartitionFeedOptions {
  partition: number;
  partitionCount: number;
  /** Each pair's change set, in sequence order. */
  publish: (set: ChangeSet) => void;
}

/** How long after the first event of a burst its change sets are published. */
export const flushDelayMs = 1;

interface Arrival {
  event: FeedEvent;
  seq: number;
}

export class PartitionFeed {
  private books = new Map<number, FeedBook>();
  private readonly dirty = new Set<FeedBook>();
  private resequencer: Resequencer<Arrival> | undefined;
  /** Arrivals while the snapshot is read; undefined once the books are live. */
  private waiting: [string | undefined, FeedEvent][] | undefined = [];
  private lastCommand: string | undefined;
  private flushQueued = false;
  /** The sequence number of the last event applied (the snapshot's at first). */
  seq = 0;
  /** When the oldest event held behind a gap arrived (performance.now()), or undefined. */
  gapSince: number | undefined;

  constructor(private readonly options: PartitionFeedOptions) {}

  /** Events held behind a gap. */
  get held(): number {
    return this.resequencer?.waiting ?? 0;
  }

  /** Starts again from scratch: arrivals wait for the next snapshot. */
  restart(): void {
    this.waiting = [];
    this.resequencer = undefined;
    this.gapSince = undefined;
  }

  /** Loads the snapshot and applies what arrived while it was read. */
  load(snapshot: PartitionSnapshot): void {
    this.flush();
    this.books = new Map();
    this.seq = snapshot.seq;
    for (const { pairId, orders } of snapshot.pairs) {
      const book = this.book(pairId)!;
      for (const order of orders) book.load(order.orderId, order.side, order.price, order.volume);
    }
    for (const [pairId, reason] of snapshot.halted) {
      const book = this.book(pairId);
      if (book === undefined) continue;
      book.halted = true;
      book.haltReason = reason;
    }
    this.resequencer = new Resequencer<Arrival>(
      (arrival, copy) => copy || this.apply(arrival),
      snapshot.seq + 1,
    );
    const waited = this.waiting ?? [];
    this.waiting = undefined;
    for (const [seq, event] of waited) this.receive(event, seq);
  }

  /** One event from the broker, with its `x-partition-sequence` header. */
  receive(event: FeedEvent, seq: string | undefined): void {
    if (this.waiting !== undefined) {
      this.waiting.push([seq, event]);
      return;
    }
    this.resequencer!.push(seq, { event, seq: Number(seq) });
    this.gapSince = this.held === 0 ? undefined : (this.gapSince ?? performance.now());
    if (!this.flushQueued) {
      this.flushQueued = true;
      // A command's events reach the queue from several exchanges, in deliveries that can
      // arrive a few hundred microseconds apart: waiting a millisecond keeps most commands in
      // one change set; the next command's first event closes a set at once anyway.
      setTimeout(() => {
        this.flushQueued = false;
        this.flush();
      }, flushDelayMs);
    }
  }

  /**
   * The pair's book: for a pair of the partition not seen yet, an empty one, kept only when
   * `keep` (a subscriber will read its changes); a look at it (`keep` false) costs nothing
   * after the answer, whatever pair id is asked for.
   */
  book(pairId: number, keep = true): FeedBook | undefined {
    if (pairId % this.options.partitionCount !== this.options.partition) return undefined;
    const book = this.books.get(pairId);
    if (book !== undefined) return book;
    const empty = new FeedBook(pairId, this.seq);
    if (keep) this.books.set(pairId, empty);
    return empty;
  }

  /** Drops a pair's book that nothing has reached (its last subscriber left). */
  forget(pairId: number): void {
    if (this.books.get(pairId)?.untouched) this.books.delete(pairId);
  }

  pairIds(): number[] {
    return [...this.books.keys()].sort((a, b) => a - b);
  }

  flush(): void {
    for (const book of this.dirty) {
      const set = book.flush();
      if (set !== undefined) this.options.publish(set);
    }
    this.dirty.clear();
  }

  private apply({ event, seq }: Arrival): void {
    if (!Number.isSafeInteger(seq) || seq <= this.seq) return;
    if (event.commandId !== this.lastCommand) this.flush();
    this.lastCommand = event.commandId;
    this.seq = seq;
    const book = this.book(event.pairId);
    if (book === undefined) return;
    book.apply(event, seq);
    this.dirty.add(book);
    // The commit's last event: nothing of the command is to come, so no need to wait for it.
    if (event.commandLast === true) this.flush();
  }
}
