/**
 * The outbox delivery loop: while this process holds the partition's lease, read the
 * events stream in order (first everything other consumers left pending is claimed, then
 * this consumer's pending list is delivered from its start, then new entries), publish
 * each event on one confirm channel with a sliding
 * window of unconfirmed events, and advance the stream only over the confirmed
 * contiguous prefix. Any broker failure stops the session, lets outstanding publishes
 * settle, and retries from the first unconfirmed entry with backoff, forever.
 */

import { brokerErrorLine } from "../infra/amqp/broker-errors";
import type { Logger } from "../infra/log";
import {
  DurabilityTimeoutError,
  PolicyViolatedError,
  WaitAbandonedError,
} from "../infra/valkey/durability";
import { SentinelHold } from "../infra/valkey/sentinel-hold";
import { AckQueue, ackBacklogMax, type InFlight } from "./ack-queue";
import { BrokerCutOff } from "./broker-cutoff";
import { decodeEntry, markCommandEnds, type StreamEntry } from "./envelope";
import type { PartitionLease } from "./lease";
import type { OutboxMetrics } from "./metrics";
import type { ConfirmOutcome, EventPublisher } from "./publisher";
import { RetryState } from "./retry-state";
import { Wakeup } from "./signal";
import {
  isMissingGroup,
  type NewEntries,
  type OutboxStream,
  type ReaderSide,
} from "./stream-reader";

export interface DeliveryOptions {
  stream: OutboxStream;
  lease: PartitionLease;
  metrics: OutboxMetrics;
  log: Logger;
  openPublisher: () => Promise<EventPublisher>;
  /** Events published and not yet confirmed, at most (1 = publish and await each confirm). */
  window: number;
  readCount: number;
  claimIdleMs: number;
  /** How long a `>` read waits for new entries; also bounds how long shutdown waits for a read. */
  readBlockMs?: number;
  /** How long a session end waits for outstanding confirms before giving up on them. */
  settleTimeoutMs?: number;
  /** A session that ran this long before it failed starts the backoff over (see run()). */
  healthySessionMs?: number;
  /** Resolves when the policy watch lifts a hold on every wait (FsyncPolicyWatch.holdLifted). */
  holdLifted?: () => Promise<void>;
  /**
   * Why the Sentinels forbid acknowledging on the primary (a failover under way): no session
   * starts meanwhile (its reads write to the stream's consumer group), up to SentinelHold's
   * bound.
   */
  sentinelsForbid?: () => string | undefined;
}

/** How a session ended: why, and which failure paces the next one, if any. */
interface SessionEnd {
  reason: StopReason | "datastore";
  failure?: "policy" | "durability-timeout";
}

type StopReason =
  | "stop"
  | "lease-lost"
  | "broker"
  | "group-missing"
  | "datastore"
  /** Another consumer holds entries that were read while this one was reading new ones. */
  | "others-pending";

/** Thrown inside a session to unwind it; the reason says what happens next. */
class SessionInterrupted extends Error {
  constructor(readonly reason: StopReason) {
    super(`session interrupted: ${reason}`);
  }
}

/** How often a backoff looks whether the Sentinels began to forbid acknowledging. */
const sentinelPollMs = 100;

/** The least time between sessions that end on a durability timeout. */
const durabilityRetryFloorMs = 250;
/**
 * Sessions while the durability policy no longer holds (see FsyncPolicyWatch) start at most
 * this often: each one ends at its first durability wait, so nothing paces it otherwise.
 */
const policyRetryMs = 1000;

export class DeliveryLoop {
  private readonly stream: OutboxStream;
  private readonly lease: PartitionLease;
  private readonly metrics: OutboxMetrics;
  private readonly log: Logger;
  private readonly openPublisher: () => Promise<EventPublisher>;
  private readonly limits: {
    window: number;
    readCount: number;
    claimIdleMs: number;
    readBlockMs: number;
    settleTimeoutMs: number;
  };
  private readonly holdLifted: () => Promise<void>;
  /** No session starts while the Sentinels fail the primary over (see sentinelsForbid). */
  private readonly sentinelHold: SentinelHold;
  private readonly acks: AckQueue;
  private readonly retry: RetryState;
  private readonly cutOff: BrokerCutOff;

  private stopping = false;
  private publisher: EventPublisher | null = null;
  /** Why the current session must end; null while it may continue. */
  private interrupt: StopReason | null = null;
  private readonly wakeup = new Wakeup();
  /** Session number: confirms from an earlier session's channel are ignored. */
  private generation = 0;
  private runPromise: Promise<void> | null = null;

  constructor(options: DeliveryOptions) {
    this.stream = options.stream;
    this.lease = options.lease;
    this.metrics = options.metrics;
    this.log = options.log;
    this.openPublisher = options.openPublisher;
    this.limits = {
      window: options.window,
      readCount: options.readCount,
      claimIdleMs: options.claimIdleMs,
      readBlockMs: options.readBlockMs ?? 1000,
      settleTimeoutMs: options.settleTimeoutMs ?? 10_000,
    };
    this.holdLifted = options.holdLifted ?? (() => new Promise(() => undefined));
    this.sentinelHold = new SentinelHold(
      options.sentinelsForbid ?? (() => undefined),
      this.log,
      "reading held",
    );
    this.acks = new AckQueue({
      stream: this.stream,
      metrics: this.metrics,
      log: this.log,
      acknowledged: () => this.wakeup.wake(),
      failed: (reason) => this.requestInterrupt(reason),
    });
    this.retry = new RetryState(this.log, this.metrics, options.healthySessionMs);
    this.cutOff = new BrokerCutOff(this.lease);
  }

  get inFlight(): number {
    return this.acks.outstanding;
  }

  /** Exchange that last returned an event as unroutable, until a retry gets past it. */
  get unroutableExchange(): string | null {
    return this.retry.unroutableExchange;
  }

  get brokerConnected(): boolean {
    return this.publisher !== null && this.publisher.failed === null;
  }

  /** Why the broker blocks publishing (a resource alarm), or null. */
  get brokerBlocked(): string | null {
    return this.publisher?.blockedReason ?? null;
  }

  start(): Promise<void> {
    this.runPromise ??= this.run();
    return this.runPromise;
  }

  /** Called by the lease keeper; losing the lease ends the session at once. */
  leaseChanged(held: boolean): void {
    this.metrics.leaseHeld.set(held ? 1 : 0);
    if (!held) {
      this.cutOff.leaseLost();
      this.requestInterrupt("lease-lost");
    }
    this.wakeup.wake();
  }

  /**
   * A datastore connection came back. A read in flight when it dropped may have moved
   * entries into this consumer's pending list with its reply lost, so the session
   * restarts: it re-delivers its own pending entries first, in order, before reading new ones.
   */
  datastoreReconnected(): void {
    // The outage is over (after a failover: on the promoted primary): a failure after this is
    // a new incident, and the backoff grown on the dead connection must not delay it.
    this.retry.restartBackoff();
    this.requestInterrupt("datastore");
  }

  /**
   * A retry's pause: ends early on a wake-up (a reconnect, a lost lease, a stop) or when the
   * policy watch lifts its hold, so publishing resumes as soon as commits are durable again.
   */
  private pause(ms: number): Promise<void> {
    return Promise.race([this.wakeup.wait(ms), this.holdLifted()]);
  }

  /**
   * A backoff's pause, which also ends once the Sentinels begin to forbid acknowledging: the
   * loop then holds its reads, and says so, for as long as the failover lasts, instead of
   * sleeping through it and reading the moment its backoff ends.
   */
  private async backoff(ms: number): Promise<void> {
    let pausing = true;
    const holdBegins = (async () => {
      while (pausing && !this.sentinelHold.holding()) await Bun.sleep(sentinelPollMs);
    })();
    try {
      await Promise.race([this.pause(ms), holdBegins]);
    } finally {
      pausing = false;
    }
  }

  /** Stops reading, lets outstanding confirms settle (bounded), acknowledges the confirmed prefix. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.requestInterrupt("stop");
    await this.runPromise;
    await this.publisher?.close();
    this.publisher = null;
  }

  private requestInterrupt(reason: StopReason): void {
    // A shutdown request wins over any other reason; otherwise the first reason stands.
    if (this.interrupt === null || reason === "stop") this.interrupt = reason;
    this.wakeup.wake();
  }

  /** True once the current session must end (a stop, a lost lease, a failure): waits end early. */
  private get interrupted(): boolean {
    return this.stopping || this.interrupt !== null || !this.lease.held();
  }

  /**
   * For a read of session `generation`: its durability wait ends early once that session
   * is over (a read-ahead can outlive it) or must end.
   */
  private abandonOutside(generation: number): () => boolean {
    return () => this.generation !== generation || this.interrupted;
  }

  private checkInterrupt(): void {
    if (this.stopping) throw new SessionInterrupted("stop");
    if (this.interrupt !== null) throw new SessionInterrupted(this.interrupt);
    if (!this.lease.held()) throw new SessionInterrupted("lease-lost");
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      if (!this.lease.held()) {
        await this.wakeup.wait(1000);
        continue;
      }
      if (this.sentinelHold.holding()) {
        await this.pause(policyRetryMs);
        continue;
      }
      const outcome = await this.session();
      if (this.stopping) break;
      if (outcome === "retry") await this.backoff(this.retry.nextDelayMs());
    }
  }

  /**
   * One period of publishing under the lease with one channel. Returns "retry" when
   * it ended on a failure that needs a backoff, "again" when it can restart at once.
   */
  private async session(): Promise<"retry" | "again"> {
    if (this.stopping) return "again";
    this.generation++;
    this.interrupt = null;
    this.acks.reset();
    let ended: SessionEnd = { reason: "stop" };
    const sessionStarted = performance.now();
    try {
      await this.ensurePublisher();
      if (await this.stream.ensureGroup())
        this.log.info("consumer group created", { group: this.stream.group });
      await this.stream.forgetIdleConsumers(this.limits.claimIdleMs).catch(() => 0);
      await this.claimOthers();
      await this.deliverOwnPending();
      await this.deliverNew();
    } catch (error) {
      ended = this.sessionEnded(error);
    }
    // Up to its failure: the settle wait at its end is not service.
    this.retry.lastSessionServedMs = performance.now() - sessionStarted;
    const reason = await this.endSession(ended.reason);
    return this.afterSession(reason, ended.failure, sessionStarted);
  }

  /** A publisher on a channel that has not failed, opened (and its failures watched) if need be. */
  private async ensurePublisher(): Promise<void> {
    if (this.publisher?.failed) {
      await this.publisher.close();
      this.publisher = null;
    }
    if (this.publisher) return;
    try {
      this.publisher = await this.openPublisher();
      this.cutOff.reached();
    } catch (error) {
      this.log.warn("cannot open the broker channel", { error: brokerErrorLine(error) });
      this.cutOff.failed();
      throw new SessionInterrupted("broker");
    }
    this.publisher.onFailure(() => this.requestInterrupt("broker"));
    this.log.info("broker channel open; event exchanges declared");
  }

  /** Why a session's work threw, said once per episode where an operator needs it. */
  private sessionEnded(error: unknown): SessionEnd {
    if (error instanceof SessionInterrupted) return { reason: error.reason };
    if (isMissingGroup(error)) return { reason: "group-missing" };
    if (this.interrupt !== null) return { reason: this.interrupt };
    // Given up because the session must end: a stop, or a lease past its local deadline
    // whose expiry timer has not fired yet.
    if (error instanceof WaitAbandonedError)
      return { reason: this.stopping ? "stop" : "lease-lost" };
    if (error instanceof PolicyViolatedError) {
      this.retry.policyViolated(error);
      return { reason: "datastore", failure: "policy" };
    }
    if (error instanceof DurabilityTimeoutError) {
      this.retry.durabilityTimedOut(error);
      return { reason: "datastore", failure: "durability-timeout" };
    }
    this.log.warn("outbox session failed on a datastore call", { error });
    return { reason: "datastore" };
  }

  /** Paces the next session after this one ended for `reason`. */
  private async afterSession(
    reason: StopReason | "datastore",
    failure: SessionEnd["failure"],
    sessionStarted: number,
  ): Promise<"retry" | "again"> {
    if (failure === "policy") {
      // Every session ends at its first durability wait until the setting is back: paced
      // here, as the timed-out wait paces a durability timeout, without a growing backoff.
      if (!this.stopping && this.interrupt === null) await this.pause(policyRetryMs);
      return "again";
    }
    if (failure === "durability-timeout") {
      // The timed-out wait paced this retry: growing the backoff on top would only delay
      // publication once the replica catches up (up to the 30 s cap). A floor keeps a short
      // durability timeout from turning an outage into a busy loop of sessions.
      const elapsedMs = performance.now() - sessionStarted;
      if (elapsedMs < durabilityRetryFloorMs && !this.stopping && this.interrupt === null)
        await this.wakeup.wait(durabilityRetryFloorMs - elapsedMs);
      return "again";
    }
    switch (reason) {
      case "broker":
      case "datastore":
        return "retry";
      case "others-pending":
        this.log.warn(
          "another consumer took entries from the stream while this one read; claiming them before reading on",
        );
        return "again";
      case "group-missing":
        this.log.warn(
          "events stream or consumer group vanished; recreating the group and continuing",
        );
        // A short pause so that a stream deleted over and over does not become a busy loop.
        await this.wakeup.wait(100);
        return "again";
      default:
        return "again";
    }
  }

  /**
   * Takes over what other consumers (a dead or demoted holder) left pending, without
   * publishing: until nobody else has pending entries nothing is delivered, since those
   * entries are older than anything read after them. Waits while they are not yet idle enough.
   */
  private async claimOthers(): Promise<void> {
    for (;;) {
      this.checkInterrupt();
      const { claimIdleMs, readCount } = this.limits;
      await this.stream.claimIdle(claimIdleMs, readCount);
      const others = await this.stream.othersPending();
      if (others === 0) return;
      this.log.info("waiting for another consumer's pending entries to become claimable", {
        pending: others,
        claimIdleMs,
      });
      await this.wakeup.wait(Math.min(1000, claimIdleMs / 2));
    }
  }

  /**
   * Delivers this consumer's pending list (what it read or claimed but never acknowledged)
   * from the start, so in stream order, before anything new.
   */
  private async deliverOwnPending(): Promise<void> {
    let cursor = "0";
    const abandon = this.abandonOutside(this.generation);
    for (;;) {
      this.checkInterrupt();
      const { entries, vanished, lastId } = await this.stream.readOwnPending(
        cursor,
        this.limits.readCount,
        abandon,
      );
      if (lastId === null) return;
      if (vanished.length > 0) {
        // Deleted while pending (by someone else's XDEL): nothing to publish, clear it from the PEL.
        this.acks.add(vanished.map((entryId) => ({ entryId, eventId: "" })));
      }
      cursor = lastId;
      await this.publishBatch(entries, false);
    }
  }

  /**
   * Reads new entries and publishes them, with the next read in flight on the other reader
   * while a batch waits for its durability and is published (see readNewOn): entries committed
   * meanwhile are read as they arrive, and their read barrier shares their commit's fsync.
   */
  private async deliverNew(): Promise<void> {
    const abandon = this.abandonOutside(this.generation);
    const { readCount, readBlockMs } = this.limits;
    let side: ReaderSide = 0;
    let next: Promise<NewEntries> | null = null;
    try {
      for (;;) {
        this.checkInterrupt();
        const read = await (next ?? this.stream.readNewOn(side, readCount, readBlockMs, abandon));
        next = null;
        // A read by another consumer since the session claimed everything (a former holder's
        // read that ran late: sent before its lease ran out, or resent or queued by its client
        // across a reconnect) took entries older than these. Deliver nothing until a new
        // session has claimed them; an idle outbox finds them at its next empty read.
        if (read.othersPending > 0) throw new SessionInterrupted("others-pending");
        // Sent while the lease is trusted, as every read: it ends within the lease's margin.
        this.checkInterrupt();
        side = side === 0 ? 1 : 0;
        // A full batch means a backlog: the next read does not wait for entries.
        const blockMs = read.entries.length === readCount ? 0 : readBlockMs;
        next = this.stream.readNewOn(side, readCount, blockMs, abandon);
        // Its failure (NOGROUP after a deleted stream, a dropped connection) is seen when it
        // is awaited; until then it must not count as an unhandled rejection, which ends
        // the process.
        next.catch(() => undefined);
        if (read.entries.length === 0) {
          // Caught up only when nothing failed meanwhile (a return or nack that arrived while
          // the read waited) and everything published so far was acknowledged by the broker.
          this.checkInterrupt();
          if (this.acks.caughtUp) this.retry.clearFailure();
          continue;
        }
        await read.durable();
        // Fewer than asked for: the read took all there was, and a commit adds its entries at
        // once, so its last entry ends its command.
        await this.publishBatch(read.entries, read.entries.length < readCount);
      }
    } finally {
      // A read still in flight moves entries into this consumer's pending list. The next
      // session reads that list first, so the read must have ended (within readBlockMs)
      // before it starts, or its entries would be passed over.
      await next?.catch(() => undefined);
    }
  }

  /** `complete`: the batch's last entry ends its command (see markCommandEnds). */
  private async publishBatch(entries: readonly StreamEntry[], complete: boolean): Promise<void> {
    if (entries.length === 0) return;
    // Under aof-replicated, entries reach here only once their read was confirmed durable.
    this.retry.readDurable();
    this.metrics.batchSize.observe(entries.length);
    const publisher = this.publisher!;
    const generation = this.generation;
    const batch = markCommandEnds(entries.map(decodeEntry), complete);
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]!;
      // Also stops a read that completed after an interrupt (e.g. one resent after a
      // reconnect, whose first attempt's entries are still unpublished in the pending
      // list): the next session re-delivers the pending list in order.
      this.checkInterrupt();
      const decoded = batch[i]!;
      if (!decoded.ok) {
        await this.stream.deadLetter(entry, decoded.reason);
        this.metrics.deadLetters.inc();
        this.log.warn("undecodable stream entry moved to the dead letter", {
          entryId: entry.id,
          reason: decoded.reason,
        });
        continue;
      }
      // The window bounds everything published and not yet moved to the acknowledgement
      // buffer, not only the unconfirmed: confirms may arrive out of order, and behind one
      // that never comes, confirmed records would pile up (in memory and in the stream).
      while (this.acks.unacknowledged >= this.limits.window || this.acks.backlog >= ackBacklogMax) {
        // Woken by each confirm and each acknowledged batch; the timeout only re-checks the
        // lease's local deadline.
        await this.wakeup.wait(1000);
        this.checkInterrupt();
      }
      // The lease is checked immediately before each publish: a holder past its
      // trusted deadline must not send even one more event.
      if (!this.lease.held()) throw new SessionInterrupted("lease-lost");
      const record = this.acks.published(decoded.event);
      let writable: boolean;
      try {
        writable = publisher.publish(decoded.event, (outcome) =>
          this.onConfirm(record, outcome, generation),
        );
      } catch (error) {
        // amqplib throws when the channel already closed; that publish will never be confirmed.
        this.onConfirm(record, "closed", generation);
        this.log.warn("publish on a closed channel", { error });
        throw new SessionInterrupted("broker");
      }
      if (!writable) {
        // Channel backpressure: wait for 'drain' (or a failure, or a confirm that may end the session).
        await Promise.race([publisher.drained(), this.wakeup.wait(1000)]);
      }
    }
  }

  private onConfirm(record: InFlight, outcome: ConfirmOutcome, generation: number): void {
    if (generation !== this.generation || !this.acks.settle(record, outcome)) return;
    if (outcome === "ack") {
      this.metrics.published.inc();
      this.metrics.confirmLatency.observe((performance.now() - record.publishedAt) / 1000);
      this.retry.confirmed(record.event);
    } else {
      if (outcome === "returned") {
        this.metrics.unroutable.inc();
        this.retry.unroutableExchange = record.event.exchange;
      }
      if (this.interrupt === null) {
        this.log.warn("broker did not accept an event; retrying from the first unconfirmed entry", {
          outcome,
          entryId: record.event.entryId,
          exchange: record.event.exchange,
        });
      }
      this.requestInterrupt("broker");
    }
    this.wakeup.wake();
  }

  /**
   * Ends a session: wait for outstanding confirms (bounded), acknowledge the confirmed
   * prefix, and remember where a failure stopped so the retry can be recognised.
   */
  private async endSession(ended: StopReason | "datastore"): Promise<StopReason | "datastore"> {
    const deadline = performance.now() + this.limits.settleTimeoutMs;
    // A failed channel confirms nothing more, and amqplib does not always fail what it still
    // awaits: its close stops at the first slot an out-of-order ack already settled, which
    // left the rest to wait out the whole settle timeout.
    while (this.acks.outstanding > 0 && !this.publisher?.failed && performance.now() < deadline) {
      await this.wakeup.wait(Math.min(100, deadline - performance.now()));
    }
    if (this.acks.outstanding > 0) {
      this.log.warn(
        this.publisher?.failed
          ? "the broker channel failed with confirms outstanding; their entries stay pending"
          : "confirms still outstanding after the settle timeout; their entries stay pending",
        { outstanding: this.acks.outstanding },
      );
      // A channel still owing confirms is not reused: the next session's publishes would add
      // a window on top of the old one, and a late return of an old copy of an entry could be
      // taken for its new copy's (returns are matched by entry id).
      await this.publisher?.close();
      this.publisher = null;
    }
    // Confirms that did arrive may have extended the prefix; push them to the stream.
    await this.acks.drain();
    // A nack, a return or a channel failure while a session ended for another reason (another
    // consumer's pending entries, a vanished group) is still a broker failure: counted, and
    // retried from the entry it stopped at, with the backoff.
    const reason =
      ended !== "stop" && ended !== "lease-lost" && this.interrupt === "broker" ? "broker" : ended;
    if (reason === "broker" || reason === "datastore") {
      if (reason === "broker") this.metrics.retries.inc();
      this.retry.stoppedAt(this.acks.firstUnconfirmed()?.entryId);
      await this.stream.recordAttempts(this.acks.unconfirmedEventIds()).catch(() => undefined);
    }
    // Later confirms from this session's channel are ignored from here on.
    this.generation++;
    this.acks.reset();
    if (reason === "lease-lost") this.log.warn("outbox lease lost; publication stopped");
    return reason;
  }
}
