/**
 * The conductor's batch loop: takes the commands already delivered (never waiting to
 * fill a batch), group-commits them, then acknowledges and replies. Any failure
 * acknowledges nothing: the batch is requeued, the books are reloaded from Valkey
 * and the loop backs off. A broken invariant is a bug, not a failure: it halts the
 * partition (nothing of its batch committed or acknowledged) and the process exits.
 */

import type { Config } from "../config/schema";
import { type MatchingEngine, MatchingInvariantError } from "../domain/index";
import { decodeBody } from "../infra/amqp/codec";
import { commandDeadLetterQueue } from "../infra/amqp/topology";
import { backoffDelayMs } from "../infra/backoff";
import { durabilityWaitMs } from "../infra/durability-policy";
import { killPoint } from "../infra/kill-point";
import type { Logger } from "../infra/log";
import { DurabilityTimeoutError } from "../infra/valkey/durability";
import type { PartitionKeys } from "../infra/valkey/keys";
import { SentinelHold } from "../infra/valkey/sentinel-hold";
import { type CommittedBatch, commitBatch, countTally, rememberUnacknowledged } from "./batch";
import { msUntilTick } from "./clock";
import type { CommandConsumer, Delivery } from "./consumer";
import type { ConductorMetrics } from "./metrics";
import { BooksMovedError, type ConductorStore, FencedError } from "./store";
import { CommandTrace, epochMs } from "./trace";
import { type ServerReplyError, unmendableReply } from "./unmendable";

/** Reload pacing after a failed batch: quick first retries (a lost reply, a failover), at most 5 s apart. */
const conductorBackoff = { baseMs: 50, capMs: 5000 };

/**
 * How long a conductor must go without deliveries, after the reload that followed a failed
 * batch, before /readyz stops reporting that failure. The requeue hands the queue to a
 * standby if there is one, and this conductor then waits in line with no batch to succeed:
 * it is healthy, and only this clears its failure. An active conductor whose batches keep
 * failing gets its requeued batch back within the reload backoff (at most 5 s), so it never
 * idles this long and stays not-ready.
 */
export const failureClearsWhenIdleMs = 10_000;

/** Batches committed but not yet acknowledged at once: one waiting for durability, one matching. */
const pipelineDepth = 2;

/** How often a conductor that does not own the partition looks for due deadlines. */
const NUDGE_EVERY_MS = 1000;

/** How often a held loop looks at the Sentinels' verdict again (the watch reads it every 200 ms). */
const sentinelHoldPollMs = 50;

/**
 * What halted the partition: a broken invariant (or an engine exception) and, when it broke on
 * one, its command; or a datastore error that every retry of the batch would get again.
 */
export interface InvariantHalt {
  kind: "invariant" | "unmendable";
  commandId: string | undefined;
  message: string;
}

interface InFlight {
  batch: Delivery[];
  committed: CommittedBatch;
  /** Resolves when the batch (and everything committed before it) is durable. */
  durable: Promise<number>;
  /** Epoch milliseconds of its stages, for the command trace. */
  takenMs: number;
  committedMs: number;
  durableMs: number;
  /** Acknowledged and replied to (settle): by settleEarly once durable, or by finish. */
  settled: boolean;
}

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
  /** Consecutive failed batches (or reloads): the backoff before the next reload grows with it. */
  private failureAttempts = 0;
  /** The writer's connection (connectionGeneration) at the last failure's backoff. */
  private failureConnection = -1;
  /** See BatchContext.unacknowledged; bounded (rememberUnacknowledged). */
  private readonly unacknowledged = new Map<string, number>();
  /** See BatchContext.backlog. */
  private readonly backlog = { marked: true };
  /** Batches committed and not yet taken off by the loop, oldest first (see loop()). */
  private readonly inFlight: InFlight[] = [];
  /** Stage times of a sample of commands (GET /trace). */
  readonly trace = new CommandTrace();
  /** Set when another conductor took the partition over: this one must exit. */
  fenced = false;
  /** Set when the batch loop itself failed unexpectedly: this one must exit. */
  crashed: Error | undefined;
  /**
   * Set when the datastore lost the partition's keys under this conductor, its fencing counter
   * included (a flush, or a promoted replica that never had them): the books restarted empty.
   * Not a reset the contract allows; /readyz reports it until the process restarts.
   */
  keysLost: { at: string; epoch: number } | undefined;
  /** Set when a broken invariant halted the partition: this one must exit (see halt()). */
  halted: InvariantHalt | undefined;
  loaded = false;
  /** The partition's owner epoch as last read from Valkey (refreshRole), or claimed here. */
  private ownerEpochSeen = 0;
  lastFailure: string | undefined;
  /** When the loop last found nothing delivered and nothing in flight (undefined while busy). */
  private idleSinceMs: number | undefined;
  /** The wall clock, read once per batch (epoch ms); a test may stand in its own. */
  clock: () => number = Date.now;
  /** When the last batch was committed (this.clock()), for the idle tick's spacing. */
  private lastBatchMs = 0;
  /** When this conductor last looked for a due deadline it cannot tick (nudgeIfDue). */
  private lastNudgeMs = 0;
  /** Batches wait while the Sentinels fail the writer's primary over (heldBySentinels). */
  private readonly sentinelHold: SentinelHold;

  constructor(
    private readonly config: Config,
    private readonly engine: MatchingEngine,
    private readonly store: ConductorStore,
    private readonly keys: PartitionKeys,
    private readonly consumer: CommandConsumer,
    private readonly metrics: ConductorMetrics,
    private readonly log: Logger,
  ) {
    this.sentinelHold = new SentinelHold(() => store.sentinelsForbid(), log, "holding batches");
  }

  notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Claims ownership and loads the books; retried by the caller on failure. */
  async takeOwnership(): Promise<void> {
    const { epoch, previous } = await this.store.claimOwnership(
      durabilityWaitMs(this.config),
      Math.max(this.epoch, this.ownerEpochSeen),
    );
    // Nobody owned the partition since this conductor's own epoch (every commit is fenced by
    // the owner epoch), so books it loaded or committed itself are still Valkey's: a requeued
    // batch, which reconnects and so claims again, costs one reload, in fail(), not two.
    const unchanged = this.loaded && this.epoch > 0 && previous === this.epoch;
    this.epoch = epoch;
    this.ownerEpochSeen = epoch;
    this.metrics.ownerEpoch.set(epoch);
    if (!unchanged) await this.reload();
    this.log.info("partition owned", { epoch, reloaded: !unchanged });
  }

  /**
   * "active" while this conductor holds the partition's current owner epoch: it claimed it
   * on the first delivery it got as the queue's single active consumer, and no conductor has
   * claimed since. Otherwise "standby": connected and loaded, but another one owns the
   * partition (or none has claimed it yet), and its books may lag that owner's.
   */
  role(): "active" | "standby" {
    return this.epoch > 0 && this.ownerEpochSeen === this.epoch ? "active" : "standby";
  }

  /** Re-reads the owner epoch: a takeover by another conductor shows within one call. */
  async refreshRole(): Promise<void> {
    this.ownerEpochSeen = await this.store.ownerEpoch();
  }

  async reload(): Promise<void> {
    this.loaded = false;
    const started = performance.now();
    // The books and the commit count must come from one node: a failover that moves the
    // writer's connection mid-load (or a commit of a fenced owner) fails the load, retried.
    const connection = this.store.writerConnection();
    const commits = await this.store.readChain();
    const orders = await this.store.loadRestingOrders();
    const stops = await this.store.loadStopOrders();
    const halts = await this.store.loadHalts();
    const clock = await this.store.loadClock();
    const switches = await this.store.loadSessions(false);
    const sweeps = await this.store.loadSessions(true);
    if (this.store.writerConnection() !== connection || (await this.store.readChain()) !== commits)
      throw new BooksMovedError();
    this.store.resetChain(commits);
    this.engine.clear();
    for (const order of orders) this.engine.loadRestingOrder(order);
    // After the resting orders: a stop's precisions are checked against its pair's.
    for (const stop of stops) this.engine.loadStopOrder(stop);
    for (const halt of halts) this.engine.loadHalt(halt.pairId, halt.reason);
    this.engine.loadClock(clock);
    for (const [userId, deadline] of switches) this.engine.loadSwitch(userId, deadline);
    for (const [userId, deadline] of sweeps) this.engine.loadSweep(userId, deadline);
    this.engine.check();
    this.backlog.marked = true;
    // Hashed now, while nothing is served: a first GET /digest would otherwise hash every
    // loaded order, in steps between batches, and slow them while it lasts.
    this.engine.digest();
    const seconds = (performance.now() - started) / 1000;
    this.metrics.bookLoadSeconds.set(seconds);
    this.metrics.reloads.inc();
    this.loaded = true;
    this.log.info("books loaded from valkey", {
      restingOrders: orders.length,
      stopOrders: stops.length,
      haltedPairs: halts.map((halt) => halt.pairId),
      seconds,
    });
  }

  start(): void {
    this.running = true;
    this.stopped = this.loop().catch((error: unknown) => this.crash(error));
  }

  /**
   * Nothing is acknowledged after this; the process exits non-zero (see run.ts) so a
   * supervisor restarts it, rather than serving HTTP in front of a dead loop.
   */
  private crash(error: unknown): void {
    this.running = false;
    this.crashed = error instanceof Error ? error : new Error(String(error));
    this.log.error("batch loop failed; stopping", { error: this.crashed });
  }

  /** Stops after the batch in flight is committed and acknowledged. */
  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    await this.stopped;
  }

  /**
   * Two batches in flight at most: while batch k waits for its durability, batch k+1 is
   * decoded, matched and committed. Acknowledgements still go strictly in order, and a
   * command is acknowledged only once its own batch is durable.
   */
  private async loop(): Promise<void> {
    const inFlight = this.inFlight;
    while (this.running || inFlight.length > 0) {
      // Batches settleEarly acknowledged while the loop awaited something else.
      while (inFlight[0]?.settled) inFlight.shift();
      const room = this.running && inFlight.length < pipelineDepth;
      const batch = room ? this.consumer.take(this.config.batchMax) : [];
      if (batch.length === 0) {
        if (inFlight.length > 0) {
          // Commands that arrive while the oldest batch waits for its durability are taken
          // at once, into the pipeline's free place, instead of waiting behind that wait.
          if (room && (await this.deliveredBefore(inFlight[0]!.durable))) continue;
          if (!(await this.finish(inFlight))) inFlight.length = 0;
          continue;
        }
        if (!this.tickDue()) {
          this.noteIdle();
          await this.nudgeIfDue();
          await this.idle();
          continue;
        }
        // Nothing delivered, but an armed order is due: a batch of no command, whose
        // clock.tick expires it.
      }
      this.idleSinceMs = undefined;
      if (await this.heldBySentinels(batch, inFlight)) continue;
      const takenMs = epochMs();
      const generation = batch[0]?.generation ?? this.claimedGeneration;
      if (generation !== this.claimedGeneration && inFlight.length > 0) {
        // A new channel: settle the old one's batches before claiming ownership again.
        this.consumer.putBack(batch);
        if (!(await this.finish(inFlight))) inFlight.length = 0;
        continue;
      }
      try {
        if (generation !== this.claimedGeneration) {
          await this.takeOwnership();
          this.claimedGeneration = generation;
        }
        inFlight.push(await this.commit(batch, takenMs));
      } catch (error) {
        if (error instanceof MatchingInvariantError || unmendableReply(error)) {
          await this.halt(error, batch, inFlight);
          return;
        }
        while (inFlight[0]?.settled) inFlight.shift();
        await this.fail([...inFlight.flatMap((f) => f.batch), ...batch], error, inFlight);
        inFlight.length = 0;
        continue;
      }
      if (inFlight.length >= pipelineDepth && !(await this.finish(inFlight))) inFlight.length = 0;
      if (this.fenced) return;
    }
  }

  /**
   * Commits a batch and starts its durability wait, timed on the wait itself: finish() runs
   * only after the next batch was decoded, matched and committed, so timing there would add
   * those stages to this one.
   */
  private async commit(batch: Delivery[], takenMs: number): Promise<InFlight> {
    const nowMs = this.clock();
    this.lastBatchMs = nowMs;
    const committed = await commitBatch(
      {
        config: this.config,
        engine: this.engine,
        store: this.store,
        keys: this.keys,
        metrics: this.metrics,
        epoch: this.epoch,
        unacknowledged: this.unacknowledged,
        nowMs,
        backlog: this.backlog,
      },
      batch,
    );
    // WAITAOF covers only the writes of its own physical connection: if the commit's
    // connection reconnected between the commit and the end of its wait (a resent WAITAOF on
    // a fresh connection answers at once), the batch is not known to be durable and fails.
    const connection = this.store.lastCommitOn();
    const committedAt = performance.now();
    const entry: InFlight = {
      batch,
      committed,
      durable: Promise.resolve(0),
      takenMs,
      committedMs: epochMs(),
      durableMs: 0,
      settled: false,
    };
    const waitMs = durabilityWaitMs(this.config);
    const durable =
      waitMs !== undefined
        ? this.store.waitDurable(waitMs, connection).finally(() => {
            entry.durableMs = epochMs();
            this.metrics.durabilityWait.observe((performance.now() - committedAt) / 1000);
          })
        : Promise.resolve(0).finally(() => {
            entry.durableMs = epochMs();
          });
    // A rejection is finish()'s to handle; this only keeps it from being "unhandled".
    durable
      .then(
        () => this.settleEarly(entry),
        () => undefined,
      )
      .catch((error: unknown) => this.crash(error));
    entry.durable = durable;
    return entry;
  }

  /**
   * A bounded sleep until a delivery wakes the loop: re-checks even if a wake-up were missed.
   * A wake-up clears the timer, so an idle loop does not leave one behind per pass.
   */
  private idle(): Promise<void> {
    const untilTick = this.mayTick()
      ? msUntilTick(this.engine, this.clock(), this.lastBatchMs)
      : undefined;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.min(200, untilTick ?? 200));
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /**
   * Only the partition's owner commits, on the channel it claimed it with: a conductor that
   * lost that channel waits for a delivery (and a claim) before it ticks again.
   */
  private mayTick(): boolean {
    return (
      this.running &&
      this.loaded &&
      this.halted === undefined &&
      this.role() === "active" &&
      this.claimedGeneration === this.consumer.channelGeneration
    );
  }

  /**
   * A conductor that does not own the partition yet (it started, or became the queue's active
   * consumer, and has had no delivery since) cannot tick. When a stored deadline is due and no
   * batch has recorded a time past it (work a tick left over counts: see stageBacklog), it
   * nudges the queue, at most every NUDGE_EVERY_MS: the active consumer takes the nudge as a
   * batch of no command, claims the partition and ticks.
   */
  private async nudgeIfDue(): Promise<void> {
    if (!this.running || !this.loaded || this.halted !== undefined || this.mayTick()) return;
    const now = this.clock();
    if (now - this.lastNudgeMs < NUDGE_EVERY_MS) return;
    this.lastNudgeMs = now;
    try {
      const due = await this.store.earliestDeadlineAfter(await this.store.loadClock());
      if (due === undefined || due > now) return;
      this.log.info("a stored deadline is due and no batch passed it: nudging the queue", { due });
      this.consumer.nudge();
    } catch (error) {
      this.log.warn("could not read the stored deadlines", { error });
    }
  }

  /** True when an idle conductor should commit a batch of no command, to expire what is due. */
  private tickDue(): boolean {
    return this.mayTick() && msUntilTick(this.engine, this.clock(), this.lastBatchMs) === 0;
  }

  /**
   * While the Sentinels fail the writer's primary over (or name another), a commit there can
   * only fail its wait, then requeue and reload; and every write makes the old primary diverge
   * further from the one they promote. The batch goes back, and the loop waits for the hold to
   * lift or the writer to move; past SentinelHold's bound one commit is tried, whose failure
   * (a READONLY reply moves the connection) reloads as before.
   */
  private async heldBySentinels(batch: Delivery[], inFlight: InFlight[]): Promise<boolean> {
    if (!this.sentinelHold.holding()) return false;
    this.consumer.putBack(batch);
    if (inFlight.length > 0) {
      if (!(await this.finish(inFlight))) inFlight.length = 0;
      return true;
    }
    await Promise.race([
      this.store.holdLifted(),
      this.store.writerReconnected(),
      Bun.sleep(sentinelHoldPollMs),
    ]);
    return true;
  }

  /** True when a delivery (or a stop) came before `durable` settled. */
  private async deliveredBefore(durable: Promise<unknown>): Promise<boolean> {
    let delivered = false;
    await Promise.race([
      durable.then(
        () => undefined,
        () => undefined,
      ),
      new Promise<void>((resolve) => {
        this.wake = () => {
          delivered = true;
          resolve();
        };
      }),
    ]);
    this.wake = undefined;
    return delivered;
  }

  /** Clears a failure the conductor has been idle past (see failureClearsWhenIdleMs). */
  private noteIdle(): void {
    const now = performance.now();
    this.idleSinceMs ??= now;
    if (this.lastFailure === undefined || now - this.idleSinceMs < failureClearsWhenIdleMs) return;
    this.log.info("no deliveries since the failed batch's reload; no longer reporting it", {
      failure: this.lastFailure,
      idleSeconds: Math.round((now - this.idleSinceMs) / 1000),
    });
    this.lastFailure = undefined;
  }

  /**
   * Waits for the oldest batch in flight to be durable, then acknowledges and replies.
   * Returns false when it failed (everything in flight was requeued).
   */
  private async finish(inFlight: InFlight[]): Promise<boolean> {
    const entry = inFlight[0]!;
    try {
      await entry.durable;
      // settleEarly ran first when it could (no dead letters): the batch is done.
      if (!entry.settled) await this.deadLetter(entry.committed.items);
    } catch (error) {
      await this.fail(
        inFlight.flatMap((f) => f.batch),
        error,
        inFlight,
      );
      return false;
    }
    inFlight.shift();
    if (!entry.settled) this.settle(entry);
    return true;
  }

  /**
   * Acknowledges and replies to a batch the moment it is durable, when every batch before it
   * is settled and it has nothing to dead-letter (finish() does that, then settles it). The
   * loop may be committing the next batch then, a Valkey round trip or two: waiting for it
   * would add that to every reply. Acknowledgements still go strictly in order.
   */
  private settleEarly(entry: InFlight): void {
    for (const earlier of this.inFlight) {
      if (earlier === entry) break;
      if (!earlier.settled) return;
    }
    if (entry.settled || !this.inFlight.includes(entry)) return;
    if (entry.committed.items.some((item) => item.deadLetterReason !== undefined)) return;
    this.settle(entry);
  }

  /** Acknowledges a durable batch with one frame, then replies, traces and counts it. */
  private settle(entry: InFlight): void {
    entry.settled = true;
    killPoint("after-durable");
    const { batch, committed } = entry;
    const items = committed.items;
    const t0 = performance.now();
    if (batch.length > 0 && !this.consumer.ack(batch)) {
      this.log.warn("batch committed but its channel is gone; it will be redelivered", {
        commands: batch.length,
      });
      // As after a failure: the redelivery replies and is these commands' first counted
      // outcome, so a client gets one reply and each command is counted once.
      rememberUnacknowledged(this.unacknowledged, committed.committed);
      return;
    }
    const now = epochMs();
    let fresh = 0;
    for (const item of items) {
      if (item.commandId !== undefined && this.trace.sampled()) {
        this.trace.record({
          commandId: item.commandId,
          receivedMs: item.delivery.receivedAtMs,
          takenMs: entry.takenMs,
          committedMs: entry.committedMs,
          durableMs: entry.durableMs,
          ackedMs: now,
        });
      }
      // Counted here, once: a later redelivery of these is a duplicate.
      if (item.commandId !== undefined) this.unacknowledged.delete(item.commandId);
      if (item.resultJson !== undefined)
        this.consumer.reply(item.delivery.message, item.resultJson, item.correlationId);
      if (item.fresh) fresh++;
      this.metrics.commandLatency.observe((now - item.delivery.receivedAtMs) / 1000);
    }
    countTally(this.metrics, committed.tally);
    this.metrics.processed.inc(fresh);
    this.metrics.batches.inc();
    this.metrics.batchSize.observe(batch.length);
    this.metrics.acknowledge.observe((performance.now() - t0) / 1000);
    this.failureAttempts = 0;
    this.lastFailure = undefined;
  }

  /** Dead-letters the batch's unreadable commands, once durable, and says so for each. */
  private async deadLetter(items: InFlight["committed"]["items"]): Promise<void> {
    const deadLetters = items.filter((item) => item.deadLetterReason !== undefined);
    if (deadLetters.length === 0) return;
    await this.consumer.deadLetter(
      deadLetters.map((item) => ({
        message: item.delivery.message,
        reason: item.deadLetterReason!,
      })),
    );
    this.metrics.deadLettered.inc(deadLetters.length);
    for (const item of deadLetters) {
      const { messageId, correlationId } = item.delivery.message.properties;
      this.log.warn("command dead-lettered", {
        queue: commandDeadLetterQueue,
        reason: item.deadLetterReason,
        messageId,
        correlationId,
      });
    }
  }

  private async fail(batch: Delivery[], error: unknown, inFlight: InFlight[] = []): Promise<void> {
    // The books may hold this batch's uncommitted effects until the reload: no query reads them.
    this.loaded = false;
    // Let every outstanding durability wait settle before the connection is reused.
    await Promise.allSettled(inFlight.map((f) => f.durable));
    // Committed but never acknowledged: their redelivery is their first counted outcome. A
    // batch that became durable meanwhile was acknowledged (settleEarly): no redelivery.
    for (const entry of inFlight)
      if (!entry.settled) rememberUnacknowledged(this.unacknowledged, entry.committed.committed);
    this.consumer.requeueFrom(batch);
    const fenced = error instanceof FencedError;
    if (fenced && error.keyspaceReset) {
      // The contract lets harnesses delete every key while the services run: the batch is
      // redelivered onto fresh books, and neither a failure count (harnesses watch it) nor a
      // not-ready answer is due.
      this.metrics.keyspaceResets.inc();
      await this.checkKeysLost();
    } else {
      this.metrics.failures.inc(batch.length);
      if (error instanceof DurabilityTimeoutError) this.metrics.durabilityTimeouts.inc();
      this.lastFailure = (error as Error).message;
    }
    if (fenced && !error.keyspaceReset) {
      this.log.error("ownership lost to another conductor; stopping without committing", {
        epoch: this.epoch,
        error: error.message,
      });
      this.fenced = true;
      this.running = false;
      return;
    }
    // A batch that was in flight when another broke an invariant: its requeue is all that is
    // due, the books are not reloaded (the process exits).
    if (this.halted !== undefined) return;
    this.log.warn("batch failed; requeued, reloading books from valkey", {
      commands: batch.length,
      error,
      attempt: this.failureAttempts,
    });
    killPoint("before-reload");
    // The books in memory may hold this batch's uncommitted effects: always reload.
    for (;;) {
      this.restartBackoffOnNewConnection();
      // A reconnect (a promoted replica answering) ends the backoff: the outage is over. So
      // does the watch lifting its hold (the Sentinels name the new primary, its replica acks).
      await Promise.race([
        Bun.sleep(backoffDelayMs(this.failureAttempts++, conductorBackoff)),
        this.store.writerReconnected(),
        this.store.holdLifted(),
      ]);
      try {
        // The requeue reconnected the consumer, so the partition is claimed again (a new
        // channel) only when deliveries reach this conductor as the active consumer: after a
        // keyspace reset it must not fence an owner that became active meanwhile.
        await this.reload();
        return;
      } catch (reloadError) {
        if (reloadError instanceof MatchingInvariantError) {
          // The books Valkey holds break an invariant: reloading them again breaks it again.
          await this.halt(reloadError);
          return;
        }
        this.log.warn("reload failed; retrying", { error: reloadError });
        if (!this.running) return;
      }
    }
  }

  /**
   * Failures on a dead primary's connection grow the backoff to seconds; once the writer is on
   * a new connection (the promoted replica), the first retries are quick again, or the backoff
   * of the outage would outlast it.
   */
  private restartBackoffOnNewConnection(): void {
    const connection = this.store.writerConnection();
    if (connection !== this.failureConnection) this.failureAttempts = 0;
    this.failureConnection = connection;
  }

  /**
   * A reset the contract allows deletes the `matching:` keys only; the fencing counter outside
   * them outlives it. When that is gone too, the datastore lost the partition's data: loud,
   * counted and on /readyz, though matching carries on, as after a reset, on empty books.
   */
  private async checkKeysLost(): Promise<void> {
    const intact = await this.store.fencingIntact().catch(() => true);
    if (intact) return;
    this.keysLost = { at: new Date().toISOString(), epoch: this.epoch };
    this.metrics.datastoreKeysLost.inc();
    this.log.error(
      "the datastore lost the partition's keys, its fencing counter too: books, stored results and dedup markers are gone; matching goes on from empty books",
      { epoch: this.epoch },
    );
  }

  /**
   * Halts the partition on a broken invariant. The engine is deterministic: requeued and
   * retried, the batch would break it again for ever, so the batch is never acknowledged nor
   * replied to, and stays in the queue (run.ts closes the channel) for a fixed build. Nothing
   * of it was committed: the engine throws while applying, before the commit is sent (see
   * commitBatch). The books in memory may hold part of it and are no longer served; the
   * process exits. Batches before it that were committed are still acknowledged.
   */
  async halt(
    error: MatchingInvariantError | ServerReplyError,
    batch: readonly Delivery[] = [],
    inFlight: InFlight[] = [],
  ): Promise<void> {
    const invariant = error instanceof MatchingInvariantError;
    const commandId = invariant ? error.commandId : undefined;
    this.halted = {
      kind: invariant ? "invariant" : "unmendable",
      commandId,
      message: error.message,
    };
    this.running = false;
    this.loaded = false;
    this.metrics.partitionHalted.set(1);
    const what = invariant
      ? "matching invariant broken"
      : "the datastore refused the batch in a way no retry can mend";
    this.log.error(`${what}: partition halted, its batch left unacknowledged`, {
      commandId,
      invariant: error.message,
      batchCommands: batch.length,
      batchFirstCommandId: commandIdOf(batch[0]),
      batchLastCommandId: commandIdOf(batch[batch.length - 1]),
      epoch: this.epoch,
      error,
    });
    // Committed before the broken batch: acknowledged and replied once durable, as always (a
    // failure requeues them, see fail()).
    while (inFlight.length > 0) if (!(await this.finish(inFlight))) break;
  }
}

/** The command id of a delivery, for a log line (undefined when it has none readable). */
function commandIdOf(delivery: Delivery | undefined): string | undefined {
  if (delivery === undefined) return undefined;
  const body = decodeBody(delivery.message.content);
  const commandId = body.ok ? (body.value as { commandId?: unknown } | null)?.commandId : undefined;
  return typeof commandId === "string" ? commandId : undefined;
}
