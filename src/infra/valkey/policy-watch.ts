/**
 * Watches the durability policy while a service runs under `aof-replicated`: how many replica
 * fsyncs a wait needs (replica-rule.ts), and the primary's `appendfsync`. The boot
 * check saw `always`, but a `CONFIG SET` afterwards would weaken every later durability wait
 * (under `everysec` some servers count an offset fsynced before it is, redis/redis#13793).
 * While it reads anything else, or the server is no longer a primary, or the setting stays
 * unreadable (two reads in a row), every durability wait fails: nothing is acknowledged or
 * published, and readiness says why.
 */
import type { Config } from "../../config/schema";
import type { Logger } from "../log";
import type { MetricsRegistry } from "../metrics";
import { parseDatastoreAddress } from "./address";
import { createValkey, parseInfo, type Valkey } from "./client";
import { appendfsyncOf, listedReplicas } from "./fsync-policy";
import { partitionKeys } from "./keys";
import { replicaLagLimitS, requiredReplicaFsyncs } from "./replica-rule";
import { askSentinels, largestDownAfterMs } from "./sentinel";

/** How often the setting is read: a change is acted on within this, plus one read. */
export const policyWatchIntervalMs = 2000;

/**
 * How often the replicas are counted: a replica that died (its link closes at once) holds up
 * the waits that still count it for at most this long.
 */
export const replicaWatchIntervalMs = 200;

export class FsyncPolicyWatch {
  private reason: string | undefined;
  /** Reads that failed in a row. */
  private failedReads = 0;
  private timer: ReturnType<typeof setInterval> | undefined;
  private replicaTimer: ReturnType<typeof setInterval> | undefined;
  private required = 1;
  /** Undefined until the Sentinels were asked (never, without Sentinels). */
  private lagLimitS: number | undefined;
  /** When the Sentinels were last asked: while none answers, at most every 10 s, not per count. */
  private sentinelsAskedAt = Number.NEGATIVE_INFINITY;

  constructor(
    /** A connection of its own: a read must not queue behind a blocked durability wait. */
    private readonly valkey: Valkey,
    private readonly log: Logger,
    private readonly intervalMs = policyWatchIntervalMs,
    /** Asks the Sentinels for their down-after-milliseconds; absent without Sentinels. */
    private readonly downAfterMs?: () => Promise<number | undefined>,
  ) {}

  /** Why the policy no longer holds, or undefined while it does. */
  violation = (): string | undefined => this.reason;

  /** Replica fsyncs a durability wait needs now (replica-rule.ts). */
  requiredReplicas = (): number => this.required;

  start(): void {
    this.timer = setInterval(() => void this.check(), this.intervalMs);
    this.replicaTimer = setInterval(() => void this.countReplicas(), replicaWatchIntervalMs);
  }

  /** Re-counts the healthy replicas of the watched primary; a failed read keeps the count. */
  async countReplicas(): Promise<void> {
    try {
      if (
        this.lagLimitS === undefined &&
        this.downAfterMs &&
        performance.now() - this.sentinelsAskedAt >= 10_000
      ) {
        this.sentinelsAskedAt = performance.now();
        this.lagLimitS = await this.lagLimitFromSentinels();
      }
      const replication = parseInfo(await this.valkey.info("replication"));
      if (replication.get("role") !== "master") return;
      const limit = this.lagLimitS ?? replicaLagLimitS(undefined);
      const required = requiredReplicaFsyncs(listedReplicas(replication), limit);
      if (required !== this.required) {
        this.log.info("durability waits need a new number of replica fsyncs", {
          from: this.required,
          to: required,
          lagLimitSeconds: limit,
        });
      }
      this.required = required;
    } catch {
      // A reconnect or a failover: the next read counts again.
    }
  }

  private async lagLimitFromSentinels(): Promise<number | undefined> {
    const downAfterMs = await this.downAfterMs?.();
    return downAfterMs === undefined ? undefined : replicaLagLimitS(downAfterMs);
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
    if (this.replicaTimer !== undefined) clearInterval(this.replicaTimer);
    this.timer = undefined;
    this.replicaTimer = undefined;
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
    slotKey: partitionKeys(config.partition).ownerEpoch,
    commandTimeoutMs: 2000,
    lazy: true,
    sentinelPassword: config.sentinelPassword,
  });
  valkey.on("error", () => undefined); // an unreadable setting keeps the last answer
  const address = parseDatastoreAddress(config.datastoreUrl);
  const downAfterMs =
    typeof address === "object" && address.kind === "sentinel"
      ? async () => largestDownAfterMs((await askSentinels(address, config.sentinelPassword)).views)
      : undefined;
  return new FsyncPolicyWatch(valkey, log, policyWatchIntervalMs, downAfterMs);
}

/** The replica rule's live figure on /metrics: how many replica fsyncs each wait needs now. */
export function exposeReplicaRule(registry: MetricsRegistry, watch: FsyncPolicyWatch): void {
  registry.gauge(
    "matching_durability_replicas_required",
    "Replica fsyncs each durability wait needs now: every healthy replica, at least 1",
    () => watch.requiredReplicas(),
  );
}
