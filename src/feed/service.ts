/**
 * The feed's running state: the event source, the snapshot and the partition's books, kept
 * in step. Whenever events could have been missed (the broker connection or queue lost, a gap
 * that stays open) it starts again from a new snapshot and sends every subscriber a fresh one.
 */

import type { Config } from "../config/schema";
import { backoffDelayMs } from "../infra/backoff";
import type { Logger } from "../infra/log";
import type { Valkey } from "../infra/valkey/client";
import type { DurabilityRule } from "../infra/valkey/durability";
import { EventSource } from "./event-source";
import type { FeedEvent } from "./feed-book";
import { FeedHub } from "./hub";
import { PartitionFeed } from "./partition-feed";
import { readSnapshot } from "./snapshot";

/** A gap open this long means the event will not come to this queue: start again. */
export const gapTimeoutMs = 10_000;
const heartbeatMs = 5_000;
/**
 * How often each client's unsent bytes are checked against its bound. Bun closes a socket at
 * twice the bound; a client that reads nothing reaches that in seconds, not in this interval.
 */
const slowClientCheckMs = 100;

export interface FeedStatus {
  ready: boolean;
  reason: string;
  resyncs: number;
}

export class FeedService {
  readonly feed: PartitionFeed;
  readonly hub: FeedHub;
  readonly status: FeedStatus = { ready: false, reason: "loading the first snapshot", resyncs: 0 };
  private source: EventSource | undefined;
  private syncing: Promise<void> | undefined;
  /** Why the source was lost while a snapshot loaded: that load must be done again. */
  private lostWhileSyncing: string | undefined;
  private stopped = false;
  private loadedOnce = false;
  private readonly timers: ReturnType<typeof setInterval>[] = [];

  constructor(
    private readonly config: Config,
    private readonly valkey: Valkey,
    private readonly rule: () => DurabilityRule,
    private readonly log: Logger,
  ) {
    const { partition, partitionCount } = config;
    this.feed = new PartitionFeed({
      partition,
      partitionCount,
      publish: (set) => this.hub.publish(set),
    });
    this.hub = new FeedHub(
      {
        book: (pairId, keep) => (this.loadedOnce ? this.feed.book(pairId, keep) : undefined),
        forget: (pairId) => this.feed.forget(pairId),
        flush: () => this.feed.flush(),
        notServed: (pairId) => this.notServed(pairId),
      },
      {
        clientBufferBytes: config.feedClientBufferBytes,
        maxSubscriptions: config.feedMaxSubscriptions,
        resumeMessages: config.feedResumeMessages,
      },
    );
  }

  /** Loads the first snapshot (retrying until it succeeds or stop()), then keeps watch. */
  async start(): Promise<void> {
    await this.resync("starting");
    this.timers.push(setInterval(() => this.hub.heartbeat(this.feed.seq), heartbeatMs));
    this.timers.push(setInterval(() => this.hub.cutSlowClients(), slowClientCheckMs));
    this.timers.push(
      setInterval(() => {
        const since = this.feed.gapSince;
        if (since !== undefined && performance.now() - since > gapTimeoutMs) {
          void this.resync(`sequence gap open for ${gapTimeoutMs} ms`);
        }
      }, 1000),
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
    await this.syncing?.catch(() => undefined);
    await this.source?.close();
  }

  /** Starts again from a new snapshot; one at a time, retried with backoff until it works. */
  resync(reason: string): Promise<void> {
    this.syncing ??= this.syncUntilDone(reason).finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  private async syncUntilDone(reason: string): Promise<void> {
    this.status.ready = false;
    this.status.reason = reason;
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        await this.syncOnce();
        if (this.lostWhileSyncing !== undefined) {
          reason = this.lostWhileSyncing;
          this.lostWhileSyncing = undefined;
          continue;
        }
        this.status.ready = true;
        this.status.reason = "live";
        if (this.loadedOnce) this.hub.rebuilt(reason);
        this.loadedOnce = true;
        this.log.info("feed books loaded", {
          reason,
          seq: this.feed.seq,
          pairs: this.feed.pairIds().length,
        });
        return;
      } catch (error) {
        this.status.reason = `${reason}; the last try failed: ${(error as Error).message}`;
        this.log.warn("feed snapshot failed; retrying", { reason, attempt, error });
        await Bun.sleep(backoffDelayMs(attempt, { capMs: 5000 }));
      }
    }
  }

  /** A new queue first, then the snapshot: no event after the snapshot can be missed. */
  private async syncOnce(): Promise<void> {
    this.status.resyncs++;
    await this.source?.close();
    this.feed.restart();
    this.source = new EventSource({
      brokerUrl: this.config.brokerUrl,
      partition: this.config.partition,
      name: `matchd-feed-p${this.config.partition}`,
      onEvent: (event, seq) => this.receive(event, seq),
      onLost: (why) => {
        if (this.syncing !== undefined) this.lostWhileSyncing = why;
        else void this.resync(why);
      },
    });
    await this.source.open();
    this.feed.load(await readSnapshot(this.valkey, this.config, this.rule()));
  }

  /**
   * An event the books cannot take (a payload the outbox never publishes) is a fault to see,
   * not to skip: said on the log, and the books start again from a durable snapshot.
   */
  private receive(event: FeedEvent, seq: string | undefined): void {
    try {
      this.feed.receive(event, seq);
    } catch (error) {
      this.log.error("an event the feed cannot apply; starting again from a snapshot", {
        type: event.type,
        seq,
        error,
      });
      void this.resync(`an event the feed cannot apply (${event.type} at ${seq})`);
    }
  }

  notServed(pairId: number): string {
    if (!this.loadedOnce) return "the feed is loading its first snapshot; try again shortly";
    const { partition, partitionCount } = this.config;
    return `pair ${pairId} belongs to partition ${pairId % partitionCount}; this feed serves partition ${partition}`;
  }
}
