/**
 * Holds a service's writes while the Sentinels forbid acknowledging on its primary (a
 * failover under way, or another primary named): a write there can only fail its wait, and
 * it makes the old primary diverge further from the replica promoted in its place, so the
 * replicas must then resynchronise in full. The conductor holds its batches, the outbox its
 * reads (which write to the stream's consumer group).
 */
import type { Logger } from "../log";

/**
 * The longest a hold lasts: a Sentinel failover takes a second or two; past this one write
 * is let through, so a switch this process missed still reaches it by a READONLY reply.
 */
export const sentinelHoldMaxMs = 5000;

export class SentinelHold {
  /** Since when (performance.now()) the current hold lasts; undefined: none. */
  private since: number | undefined;

  constructor(
    /** Why the Sentinels forbid acknowledging now (DurabilityRule.sentinelsForbid). */
    private readonly forbid: () => string | undefined,
    private readonly log: Logger,
    /** What the log says is held, "holding batches" say. */
    private readonly what: string,
    private readonly maxMs = sentinelHoldMaxMs,
  ) {}

  /** True while writes must wait; false when they may go (no hold, or one past its bound). */
  holding(): boolean {
    const reason = this.forbid();
    if (reason === undefined) {
      this.since = undefined;
      return false;
    }
    const now = performance.now();
    if (this.since === undefined) {
      this.since = now;
      this.log.info(`${this.what} while the Sentinels forbid acknowledging on this primary`, {
        reason,
      });
    }
    if (now - this.since <= this.maxMs) return true;
    this.since = undefined;
    return false;
  }
}
