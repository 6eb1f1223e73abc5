/**
 * A lease holder that cannot reach the broker: after three lease TTLs without a channel it
 * hands the lease over and stays standby for two, so that an outbox whose path to the broker
 * works takes over (and when no outbox reaches it, the lease only passes around).
 */

import type { PartitionLease } from "./lease";

export class BrokerCutOff {
  /** Since when (performance.now()) opening a broker channel has failed, or null. */
  private downSince: number | null = null;

  constructor(private readonly lease: PartitionLease) {}

  /** A channel opened: the broker is reachable. */
  reached(): void {
    this.downSince = null;
  }

  /**
   * The lease was lost: a holder cut off from the broker counts from its own first failure
   * under this lease, so one that takes it again later must not resign at its first failure.
   */
  leaseLost(): void {
    this.downSince = null;
  }

  /** Opening a channel failed: resigns once that has lasted three lease TTLs. */
  failed(now = performance.now()): void {
    this.downSince ??= now;
    if (!this.lease.held() || now - this.downSince < 3 * this.lease.ttl) return;
    this.downSince = null;
    void this.lease.resign(2 * this.lease.ttl);
  }
}
