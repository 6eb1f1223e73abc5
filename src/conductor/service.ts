/**
 * The conductor's batch loop: takes the commands already delivered (never waiting to
 * fill a batch), group-commits them, then acknowledges and replies. Any failure
 * acknowledges nothing: the batch is requeued, the books are reloaded from Valkey
 * and the loop backs off.
 */
import type { Config } from "../config/schema";
import type { MatchingEngine } from "../domain/index";
import type { Logger } from "../infra/log";
import { DurabilityTimeoutError } from "../infra/valkey/durability";
import type { PartitionKeys } from "../infra/valkey/keys";
import { type BatchItem, commitBatch } from "./batch";
import type { CommandConsumer, Delivery } from "./consumer";
import type { ConductorMetrics } from "./metrics";
import { type ConductorStore, FencedError } from "./store";

const unacknowledgedMax = 100_000;

export class Conductor {
  private epoch = 0;
  /**
   * The consumer channel generation this conductor claimed ownership on. Ownership is
   * claimed when the first delivery of a channel arrives (this consumer became the
   * queue's single active consumer), not at boot: a standby that boots must not fence
   * the conductor that is still serving the partition.
   */
  private claimedGeneration = -1;
  private wake: (() => void) | undefined;
  private running = false;
  private stopped: Promise<void> | undefined;
  private failureBackoffMs = 0;
  /** See BatchContext.unacknowledged; bounded because a purged queue never redelivers. */
  private readonly unacknowledged = new Map<string, number>();
  /** Set when another conductor took the partition over: this one must exit. */
  fenced = false;
  loaded = false;
  lastFailure: string | undefined;

  constructor(
    private readonly config: Config,
    private readonly engine: MatchingEngine,
    private readonly store: ConductorStore,
    private readonly keys: PartitionKeys,
    private readonly consumer: CommandConsumer,
    private readonly metrics: ConductorMetrics,
    private readonly log: Logger,
  ) {}

  get ownerEpoch(): number {
    return this.epoch;
  }

  notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Claims ownership and loads the books; retried by the caller on failure. */
  async takeOwnership(): Promise<void> {
    this.epoch = await this.store.claimOwnership();
    this.metrics.ownerEpoch.set(this.epoch);
    await this.reload();
    this.log.info("partition owned", { epoch: this.epoch });
  }

  async reload(): Promise<void> {
    this.loaded = false;
    const started = performance.now();
    const orders = await this.store.loadRestingOrders();
    this.engine.clear();
    for (const order of orders) this.engine.loadRestingOrder(order);
    this.engine.check();
    const seconds = (performance.now() - started) / 1000;
    this.metrics.bookLoadSeconds.set(seconds);
    this.metrics.reloads.inc();
    this.loaded = true;
    this.log.info("books loaded from valkey", {
      restingOrders: orders.length,
      seconds,
      digest: this.engine.digest(),
    });
  }

  start(): void {
    this.running = true;
    this.stopped = this.loop();
  }

  /** Stops after the batch in flight is committed and acknowledged. */
  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    await this.stopped;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const batch = this.consumer.take(this.config.batchMax);
      if (batch.length === 0) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          // A bounded sleep: re-check even if a wake-up were missed.
          setTimeout(resolve, 200);
        });
        continue;
      }
      await this.process(batch);
      if (this.fenced) return;
    }
  }

  private async process(batch: Delivery[]): Promise<void> {
    let items: BatchItem[];
    try {
      const generation = batch[0]!.generation;
      if (generation !== this.claimedGeneration) {
        await this.takeOwnership();
        this.claimedGeneration = generation;
      }
      items = await commitBatch(
        {
          config: this.config,
          engine: this.engine,
          store: this.store,
          keys: this.keys,
          metrics: this.metrics,
          epoch: this.epoch,
          unacknowledged: this.unacknowledged,
        },
        batch,
      );
    } catch (error) {
      await this.fail(batch, error);
      return;
    }
    const t0 = performance.now();
    const deadLetters = items.filter((item) => item.deadLetterReason !== undefined);
    if (deadLetters.length > 0) {
      try {
        await this.consumer.deadLetter(
          deadLetters.map((item) => ({
            message: item.delivery.message,
            reason: item.deadLetterReason!,
          })),
        );
      } catch (error) {
        // The commit is durable; requeued commands come back as redeliveries.
        await this.fail(batch, error);
        return;
      }
    }
    if (!this.consumer.ack(batch)) {
      this.log.warn("batch committed but its channel is gone; it will be redelivered", {
        commands: batch.length,
      });
    }
    // Counted below, once: a later redelivery of these is a duplicate.
    for (const item of items)
      if (item.commandId !== undefined) this.unacknowledged.delete(item.commandId);
    if (this.unacknowledged.size > unacknowledgedMax) this.unacknowledged.clear();
    const now = Date.now();
    let fresh = 0;
    for (const item of items) {
      if (item.resultJson !== undefined)
        this.consumer.reply(item.delivery.message, item.resultJson);
      if (item.fresh) fresh++;
      this.metrics.commandLatency.observe((now - item.delivery.receivedAtMs) / 1000);
    }
    this.metrics.deadLettered.inc(deadLetters.length);
    this.metrics.processed.inc(fresh);
    this.metrics.batches.inc();
    this.metrics.batchSize.observe(batch.length);
    this.metrics.acknowledge.observe((performance.now() - t0) / 1000);
    this.failureBackoffMs = 0;
    this.lastFailure = undefined;
  }

  private async fail(batch: Delivery[], error: unknown): Promise<void> {
    this.consumer.requeueFrom(batch);
    this.metrics.failures.inc(batch.length);
    if (error instanceof DurabilityTimeoutError) this.metrics.durabilityTimeouts.inc();
    this.lastFailure = (error as Error).message;
    this.failureBackoffMs = Math.min(Math.max(this.failureBackoffMs * 2, 50), 5000);
    if (error instanceof FencedError && !error.keyspaceReset) {
      this.log.error("ownership lost to another conductor; stopping without committing", {
        epoch: this.epoch,
        error: error.message,
      });
      this.fenced = true;
      this.running = false;
      return;
    }
    this.log.warn("batch failed; requeued, reloading books from valkey", {
      commands: batch.length,
      error,
      backoffMs: this.failureBackoffMs,
    });
    // The books in memory may hold this batch's uncommitted effects: always reload.
    for (;;) {
      await Bun.sleep(this.failureBackoffMs);
      try {
        if (error instanceof FencedError) await this.takeOwnership();
        else await this.reload();
        return;
      } catch (reloadError) {
        this.failureBackoffMs = Math.min(this.failureBackoffMs * 2, 5000);
        this.log.warn("reload failed; retrying", { error: reloadError });
        if (!this.running) return;
      }
    }
  }
}
