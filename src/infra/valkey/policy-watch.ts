/**
 * Re-reads the primary's `appendfsync` while a service runs under `aof-replicated`: the boot
 * check saw `always`, but a `CONFIG SET` afterwards would weaken every later durability wait
 * (under `everysec` some servers count an offset fsynced before it is, redis/redis#13793).
 * While it reads anything else, or the server is no longer a primary, or the setting stays
 * unreadable (two reads in a row), every durability wait fails: nothing is acknowledged or
 * published, and readiness says why.
 */
import type { Config } from "../../config/schema";
import type { Logger } from "../log";
import { createValkey, parseInfo, type Valkey } from "./client";
import { appendfsyncOf } from "./fsync-policy";

/** How often the setting is read: a change is acted on within this, plus one read. */
export const policyWatchIntervalMs = 2000;

export class FsyncPolicyWatch {
  private reason: string | undefined;
  /** Reads that failed in a row. */
  private failedReads = 0;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    /** A connection of its own: a read must not queue behind a blocked durability wait. */
    private readonly valkey: Valkey,
    private readonly log: Logger,
    private readonly intervalMs = policyWatchIntervalMs,
  ) {}

  /** Why the policy no longer holds, or undefined while it does. */
  violation = (): string | undefined => this.reason;

  start(): void {
    this.timer = setInterval(() => void this.check(), this.intervalMs);
  }

  async check(): Promise<void> {
    let value: string | undefined;
    try {
      // The server read must still be the primary: after a failover behind one address this
      // connection could stay on the old one, now a replica, while the writer moved on.
      const role = parseInfo(await this.valkey.info("replication")).get("role");
      const setting = await appendfsyncOf(this.valkey);
      value = role === "master" ? setting : `unknown (the watched server's role is ${role})`;
      this.failedReads = 0;
    } catch (error) {
      // One failed read (a reconnect, say) keeps the last answer; a setting that stays
      // unreadable cannot be vouched for, so from the second failure in a row it counts as
      // wrong. A server that is gone fails the durability waits by itself anyway.
      if (++this.failedReads < 2) return;
      value = `unreadable (${(error as Error).message})`;
    }
    if (value === "always") {
      if (this.reason !== undefined) {
        this.log.info("appendfsync is always again; durability waits may succeed", {});
      }
      this.reason = undefined;
      return;
    }
    if (this.reason === undefined) {
      this.log.error(
        "appendfsync changed on the primary; nothing is acknowledged until it is always again",
        { appendfsync: value },
      );
    }
    this.reason = `appendfsync is ${value ?? "unreadable"} on the primary, not always`;
  }

  /** Stops reading and closes the connection. */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.valkey.disconnect();
  }
}

/** A watch on a connection of its own under `aof-replicated`; none under `memory`. */
export function watchFsyncPolicy(
  config: Config,
  log: Logger,
  connectionName: string,
): FsyncPolicyWatch | undefined {
  if (config.durability !== "aof-replicated") return undefined;
  const valkey = createValkey(config.datastoreUrl, {
    name: connectionName,
    commandTimeoutMs: 2000,
    lazy: true,
  });
  valkey.on("error", () => undefined); // an unreadable setting keeps the last answer
  return new FsyncPolicyWatch(valkey, log);
}
