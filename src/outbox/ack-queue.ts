/**
 * What a delivery session published, in stream order, until the broker confirms it; then the
 * confirmed contiguous prefix, as stream acknowledgements (XACK + XDEL) in batches. The stream
 * advances only over that prefix, so a retry starts at the first unconfirmed entry.
 */

import { killPoint } from "../infra/kill-point";
import type { Logger } from "../infra/log";
import type { OutboxEvent } from "./envelope";
import type { OutboxMetrics } from "./metrics";
import type { ConfirmOutcome } from "./publisher";
import { type AckItem, isMissingGroup, type OutboxStream } from "./stream-reader";

export interface InFlight {
  event: OutboxEvent;
  publishedAt: number;
  outcome: ConfirmOutcome | null;
}

/** Entries per acknowledgement: bounds one script call, whose Lua unpack takes at most ~8,000 values. */
const ackBatchMax = 5000;
/**
 * Confirmed events waiting for their XACK + XDEL beyond which publishing waits: the window
 * bounds only unconfirmed events, and a datastore that stops acknowledging while the broker
 * keeps confirming would otherwise grow the buffer (and the reads behind it) without limit.
 */
export const ackBacklogMax = 4 * ackBatchMax;

export interface AckQueueDeps {
  stream: OutboxStream;
  metrics: OutboxMetrics;
  log: Logger;
  /** A batch was acknowledged: a publisher waiting on the backlog may go on. */
  acknowledged: () => void;
  /** Acknowledging failed: the session must end (the entries stay pending). */
  failed: (reason: "group-missing" | "datastore") => void;
}

export class AckQueue {
  /** Published events in stream order; `head` is the oldest not yet in the confirmed prefix. */
  private queue: InFlight[] = [];
  private head = 0;
  private unconfirmed = 0;
  private buffer: AckItem[] = [];
  private flushing: Promise<void> | null = null;

  constructor(private readonly deps: AckQueueDeps) {}

  /** Published and not yet confirmed by the broker. */
  get outstanding(): number {
    return this.unconfirmed;
  }

  /**
   * Published and not yet moved to the acknowledgement buffer: confirms may arrive out of
   * order, and behind one that never comes, confirmed records would pile up.
   */
  get unacknowledged(): number {
    return this.queue.length - this.head;
  }

  /** Confirmed events whose acknowledgement has not been written yet. */
  get backlog(): number {
    return this.buffer.length;
  }

  /** Everything published was confirmed, in order. */
  get caughtUp(): boolean {
    return this.unconfirmed === 0 && this.head === this.queue.length;
  }

  /** The first event the broker has not confirmed in order, if any. */
  firstUnconfirmed(): OutboxEvent | undefined {
    return this.queue[this.head]?.event;
  }

  unconfirmedEventIds(): string[] {
    return this.queue.slice(this.head).map((record) => record.event.eventId);
  }

  published(event: OutboxEvent): InFlight {
    const record: InFlight = { event, publishedAt: performance.now(), outcome: null };
    this.queue.push(record);
    this.unconfirmed++;
    return record;
  }

  /** Records the broker's answer; false when the record had one already. */
  settle(record: InFlight, outcome: ConfirmOutcome): boolean {
    if (record.outcome !== null) return false;
    record.outcome = outcome;
    this.unconfirmed--;
    if (outcome === "ack") this.advancePrefix();
    return true;
  }

  /** Entries to acknowledge without a publish (deleted while pending). */
  add(items: AckItem[]): void {
    for (const item of items) this.buffer.push(item);
    this.scheduleFlush();
  }

  /** Writes every acknowledgement still buffered or being written. */
  async drain(): Promise<void> {
    while (this.flushing !== null) await this.flushing;
    if (this.buffer.length > 0) await this.flushAcks();
  }

  /** Forgets the session's records: later confirms of its channel are ignored by the caller. */
  reset(): void {
    this.queue = [];
    this.head = 0;
    this.unconfirmed = 0;
    this.buffer = [];
  }

  /** Moves the confirmed contiguous prefix into the acknowledgement buffer. */
  private advancePrefix(): void {
    const start = this.head;
    while (this.head < this.queue.length && this.queue[this.head]!.outcome === "ack") this.head++;
    if (this.head === start) return;
    // An event carries its entry and event ids: it is its own acknowledgement item.
    for (let i = start; i < this.head; i++) this.buffer.push(this.queue[i]!.event);
    if (this.head > 4096) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    // Started from a microtask so that a burst of confirms (one multiple-ack frame)
    // lands in one transaction; while one is running the next batch accumulates.
    if (this.flushing === null) this.flushing = Promise.resolve().then(() => this.flushAcks());
  }

  private async flushAcks(): Promise<void> {
    const { stream, metrics, log } = this.deps;
    try {
      while (this.buffer.length > 0) {
        const batch = this.buffer.splice(0, ackBatchMax);
        killPoint("after-publish");
        try {
          await stream.acknowledge(batch);
          metrics.ackBatchSize.observe(batch.length);
          this.deps.acknowledged();
        } catch (error) {
          // The entries stay pending and are republished after the retry; consumers dedup by event id.
          this.buffer = [];
          log.warn("acknowledging delivered entries failed; they will be republished", {
            error,
            entries: batch.length,
          });
          // A datastore failure, not a broker one: no publish retry is counted, and a vanished
          // group is recreated at once.
          this.deps.failed(isMissingGroup(error) ? "group-missing" : "datastore");
          return;
        }
      }
    } finally {
      this.flushing = null;
    }
  }
}
