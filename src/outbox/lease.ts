/**
 * The partition's publishing lease: one outbox publishes per partition, which is what
 * keeps events in stream order. Taken with SET NX PX (in a script, so that a datastore at
 * maxmemory does not refuse it), renewed every TTL/3 with a
 * compare-and-PEXPIRE script, released with compare-and-delete. Validity is judged
 * on this process's own monotonic clock so that a holder cut off from the datastore
 * stops publishing before the key can expire and a standby can take over.
 */
import type { Logger } from "../infra/log";
import type { Valkey } from "../infra/valkey/client";
import { type LuaScript, runScript } from "../infra/valkey/lua-script";
import { acquireLeaseScript, releaseLeaseScript, renewLeaseScript } from "./scripts";

export interface LeaseOptions {
  valkey: Valkey;
  key: string;
  ownerId: string;
  ttlMs: number;
  log: Logger;
  /** How often a standby tries to take the lease. */
  acquireIntervalMs?: number;
  onChange?: (held: boolean) => void;
}

export class PartitionLease {
  private readonly valkey: Valkey;
  private readonly key: string;
  readonly ownerId: string;
  private readonly ttlMs: number;
  private readonly log: Logger;
  private readonly acquireIntervalMs: number;
  private readonly onChange: (held: boolean) => void;
  /**
   * A lease is only trusted until local expiry minus this margin, which absorbs clock
   * drift between this host and the datastore and the time a publish takes to leave.
   */
  readonly safetyMarginMs: number;
  /** Local monotonic deadline (performance.now()) measured from when the SET/renew was sent. */
  private expiresAt = 0;
  private wasHeld = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private expiryTimer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  /** The keeper's current round (a SET NX or a renewal), awaited by release(). */
  private ticking: Promise<void> | undefined;
  /** Who holds the lease when this process does not, for readiness and logs. */
  otherHolder: string | null = null;
  /** Until then (performance.now()) this process does not take the lease: it resigned. */
  private standbyUntil = 0;

  constructor({
    valkey,
    key,
    ownerId,
    ttlMs,
    log,
    acquireIntervalMs = 1000,
    onChange,
  }: LeaseOptions) {
    this.valkey = valkey;
    this.key = key;
    this.ownerId = ownerId;
    this.ttlMs = ttlMs;
    this.log = log;
    this.acquireIntervalMs = acquireIntervalMs;
    this.onChange = onChange ?? (() => undefined);
    this.safetyMarginMs = Math.min(1000, Math.floor(ttlMs / 5));
  }

  /** The lease's time to live. */
  get ttl(): number {
    return this.ttlMs;
  }

  /**
   * Gives the lease up and stays standby for `forMs`: a holder that cannot publish (its
   * broker unreachable) lets another outbox, whose path to the broker may work, take over
   * rather than keep the partition's events waiting behind it.
   */
  async resign(forMs: number): Promise<void> {
    this.standbyUntil = performance.now() + forMs;
    if (!this.held()) return;
    if (await this.giveUp())
      this.log.warn("outbox lease handed over: this outbox cannot publish", {
        owner: this.ownerId,
        standbyMs: forMs,
      });
  }

  /** True while this process may publish: checked before every publish. */
  held(): boolean {
    return performance.now() < this.expiresAt - this.safetyMarginMs;
  }

  /** Starts the keeper loop: acquire every second while standby, renew every TTL/3 while holding. */
  start(): void {
    this.stopped = false;
    void this.tick();
  }

  /** Stops the keeper and deletes the lease key if it names this owner (compare-and-delete). */
  async release(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    // A SET NX or renewal in flight decides what this process holds: wait for it, so that a
    // lease it takes at the last moment is deleted too rather than kept for a whole TTL.
    await this.ticking?.catch(() => undefined);
    clearTimeout(this.timer);
    // Sent even when this process no longer trusts its lease (a lost renewal reply let the
    // local deadline pass while the key still names it): the script deletes the key only
    // when it names this owner, so a successor never waits out the TTL for nothing.
    if (await this.giveUp()) this.log.info("outbox lease released", { owner: this.ownerId });
  }

  /**
   * Stops publishing at once, then deletes the key if it still names this owner (compare
   * and delete). True when it deleted it; a failure only logs: the key expires within the TTL.
   */
  private async giveUp(): Promise<boolean> {
    clearTimeout(this.expiryTimer);
    this.expiresAt = 0;
    this.setHeld(false);
    try {
      return (
        Number(await runScript(this.valkey, releaseLeaseScript, [this.key], [this.ownerId])) === 1
      );
    } catch (error) {
      this.log.warn("outbox lease release failed; it will expire", { error });
      return false;
    }
  }

  /** Takes or renews the lease for this owner and TTL; true when the script did. */
  private async runLeaseScript(script: LuaScript): Promise<boolean> {
    return (
      Number(await runScript(this.valkey, script, [this.key], [this.ownerId, this.ttlMs])) === 1
    );
  }

  private tick(): Promise<void> {
    this.ticking = this.keep();
    return this.ticking;
  }

  private async keep(): Promise<void> {
    if (this.stopped) return;
    const sentAt = performance.now();
    let next = this.acquireIntervalMs;
    let failed = false;
    try {
      if (this.held()) {
        if (await this.runLeaseScript(renewLeaseScript)) {
          this.extend(sentAt);
        } else {
          this.log.warn("outbox lease lost: another owner holds it or it expired", {
            owner: this.ownerId,
          });
          this.expiresAt = 0;
          this.setHeld(false);
        }
      } else if (sentAt < this.standbyUntil) {
        // Resigned: another outbox may take the lease meanwhile.
        next = Math.min(this.acquireIntervalMs, this.standbyUntil - sentAt + 5);
      } else {
        // A script that may write at maxmemory: see scripts.ts.
        if (await this.runLeaseScript(acquireLeaseScript)) {
          this.extend(sentAt);
          this.otherHolder = null;
        } else {
          const [holder, ttlLeftMs] = await this.holderAndTtl();
          this.otherHolder = holder;
          // Try again right after the holder's key would expire, so a dead holder is
          // replaced within one TTL rather than one TTL plus a polling interval.
          if (ttlLeftMs > 0) next = Math.min(this.acquireIntervalMs, ttlLeftMs + 5);
          // Our own id means a renewal reply was lost; the key is still ours, so renew it.
          if (this.otherHolder === this.ownerId) {
            if (await this.runLeaseScript(renewLeaseScript)) {
              this.extend(sentAt);
              this.otherHolder = null;
            }
          }
        }
      }
    } catch (error) {
      // A datastore error leaves the local deadline as it was: the expiry timer stops
      // publishing if renewals keep failing.
      this.log.warn("outbox lease keeper could not reach the datastore", { error });
      failed = true;
    }
    // A renewal that was in flight when the lease was resigned does not take it back.
    if (performance.now() < this.standbyUntil) this.expiresAt = 0;
    if (this.held()) {
      this.setHeld(true);
      // After a failed renewal, try again soon rather than a third of the TTL later: a
      // datastore restart of a few seconds should not cost a lease that is still valid.
      next = failed
        ? Math.max(50, Math.floor(this.ttlMs / 10))
        : Math.max(50, Math.floor(this.ttlMs / 3));
    } else {
      next = Math.max(10, next);
      this.setHeld(false);
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), next);
  }

  private async holderAndTtl(): Promise<[string | null, number]> {
    const reply = await this.valkey.pipeline().get(this.key).pttl(this.key).exec();
    const holder = reply?.[0]?.[1];
    const ttlLeftMs = Number(reply?.[1]?.[1] ?? -1);
    return [typeof holder === "string" ? holder : null, ttlLeftMs];
  }

  private extend(sentAt: number): void {
    this.expiresAt = sentAt + this.ttlMs;
    clearTimeout(this.expiryTimer);
    // Fires exactly when trust runs out, so publishing stops even if a renewal is stuck.
    const trustMs = this.expiresAt - this.safetyMarginMs - performance.now();
    this.expiryTimer = setTimeout(() => {
      if (!this.held() && this.wasHeld) {
        this.log.warn(
          "outbox lease expired locally before a renewal succeeded; stopping publication",
        );
        this.setHeld(false);
      }
    }, Math.max(0, trustMs) + 1);
  }

  private setHeld(held: boolean): void {
    if (held === this.wasHeld) return;
    this.wasHeld = held;
    if (held) this.log.info("outbox lease acquired", { owner: this.ownerId, ttlMs: this.ttlMs });
    this.onChange(held);
  }
}
