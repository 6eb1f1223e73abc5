/**
 * What the delivery loop remembers across sessions about failures: the backoff attempt, the
 * entry a failure stopped at (its confirm proves the retry got past it), an exchange that
 * returned an event as unroutable, and the episodes it logs once rather than every session.
 */

import { backoffDelayMs } from "../infra/backoff";
import type { Logger } from "../infra/log";
import type { OutboxEvent } from "./envelope";
import type { OutboxMetrics } from "./metrics";

/** The default of DeliveryOptions.healthySessionMs. */
export const defaultHealthySessionMs = 10_000;

export class RetryState {
  private attempt = 0;
  /** How long the last session ran before it ended (its end's settle wait left out). */
  lastSessionServedMs = 0;
  /** Durability timeouts since a read was last confirmed durable: only the first is a warning. */
  private durabilityTimeoutsInARow = 0;
  /** Whether the policy's violation was logged in this episode (once, not every session). */
  private policyViolationLogged = false;
  /** The entry a failure stopped at; its confirm proves the retry got past it. */
  private failedEntryId: string | null = null;
  /** Exchange that last returned an event as unroutable, until a retry gets past it. */
  unroutableExchange: string | null = null;

  constructor(
    private readonly log: Logger,
    private readonly metrics: OutboxMetrics,
    private readonly healthySessionMs = defaultHealthySessionMs,
  ) {}

  /** The backoff before the next session after a failure. */
  nextDelayMs(): number {
    // A session that served this long before failing is a new incident, not the next try of
    // the last one: a failure with nothing unconfirmed (a reader reconnect, a failed
    // acknowledgement) names no entry whose confirm would reset the backoff, and under steady
    // load no read comes back empty to reset it either.
    if (this.lastSessionServedMs >= this.healthySessionMs) this.attempt = 0;
    const delayMs = backoffDelayMs(this.attempt++);
    this.log.info("outbox retrying after backoff", { delayMs, attempt: this.attempt });
    return delayMs;
  }

  /** An outage is over (a datastore reconnect): the next failure is a new incident. */
  restartBackoff(): void {
    this.attempt = 0;
  }

  /**
   * Whatever failed before is behind us: the retry got past the failed entry, or everything
   * up to the end of the stream is confirmed (also when it failed with nothing in flight, an
   * idle connection dropped, or its entry was deleted meanwhile). The backoff starts from
   * the beginning again at the next failure.
   */
  clearFailure(): void {
    this.failedEntryId = null;
    this.unroutableExchange = null;
    this.attempt = 0;
  }

  /** A session failed with `entryId` the first unconfirmed (or none in flight). */
  stoppedAt(entryId: string | undefined): void {
    this.failedEntryId = entryId ?? this.failedEntryId;
  }

  /** The broker confirmed an event. */
  confirmed(event: OutboxEvent): void {
    if (event.entryId === this.failedEntryId) {
      // The retry got past the entry that failed.
      this.clearFailure();
    } else if (event.exchange === this.unroutableExchange) {
      // That exchange routes again (its failed entry may be gone, deleted by someone else).
      this.unroutableExchange = null;
    }
  }

  /** The policy no longer holds: said once per episode. */
  policyViolated(error: unknown): void {
    if (this.policyViolationLogged) return;
    this.policyViolationLogged = true;
    this.log.error("outbox publishes nothing while the durability policy does not hold", {
      error,
    });
  }

  /** A read was not confirmed durable in time: a warning once per episode. */
  durabilityTimedOut(error: unknown): void {
    this.metrics.durabilityTimeouts.inc();
    // One warning per episode (until a read is confirmed durable); the repeats at debug.
    if (this.durabilityTimeoutsInARow++ === 0)
      this.log.warn("outbox read not confirmed durable; retrying until it is", { error });
    else this.log.debug("outbox read still not confirmed durable", { error });
  }

  /** A read was confirmed durable: the episodes above are over, and said to be. */
  readDurable(): void {
    if (this.policyViolationLogged) {
      this.log.info("outbox reads confirmed durable under the policy again", {});
      this.policyViolationLogged = false;
    }
    if (this.durabilityTimeoutsInARow > 0) {
      this.log.info("outbox reads confirmed durable again", {
        timeouts: this.durabilityTimeoutsInARow,
      });
      this.durabilityTimeoutsInARow = 0;
    }
  }
}
