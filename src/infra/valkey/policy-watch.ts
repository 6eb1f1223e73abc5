/**
 * Watches the durability policy while a service runs under `aof-replicated`: how many replica
 * fsyncs a wait needs and, with Sentinels, whether they still name the watched server the
 * primary with no failover under way (replica-rule.ts); and the primary's `appendfsync`. The boot
 * check saw `always`, but a `CONFIG SET` afterwards would weaken every later durability wait
 * (under `everysec` some servers count an offset fsynced before it is, redis/redis#13793).
 * While it reads anything else, or the server is no longer a primary, or the setting stays
 * unreadable (two reads in a row), every durability wait fails: nothing is acknowledged or
 * published, and readiness says why.
 */

import type { Config } from "../../config/schema";
import { waitsForReplicas } from "../durability-policy";
import type { Readiness } from "../http/app";
import type { Logger } from "../log";
import type { MetricsRegistry } from "../metrics";
import { parseDatastoreAddress } from "./address";
import { connectionGeneration, createValkey, nodeAddress, parseInfo, type Valkey } from "./client";
import type { DurabilityRule } from "./durability";
import { appendfsyncOf, type ListedReplica, listedReplicas } from "./fsync-policy";
import { partitionKeys } from "./keys";
import { probeClient } from "./probe-client";
import {
  announcedAddress,
  defaultReplicaLagLimitS,
  requiredReplicaFsyncs,
  type SentinelReplicaView,
  type SentinelRuleOutcome,
  sentinelReplicaRule,
} from "./replica-rule";
import { SentinelPoller } from "./sentinel";
import { sentinelHoldMaxMs } from "./sentinel-hold";

/** How often the setting is read: a change is acted on within this, plus one read. */
export const policyWatchIntervalMs = 2000;

/**
 * How often the replicas are counted: a replica that died (its link closes at once) holds up
 * the waits that still count it for at most this long.
 */
export const replicaWatchIntervalMs = 200;

/**
 * How long a failing-over primary's writes stay paused: past the promotion (a Sentinel timer
 * tick or two after +try-failover, after an election when the primary is down to them) and
 * the replicas' reconfiguration (up to a second after it, once the leader's INFO shows the
 * promotion). Writes blocked by the pause run when it ends: before that, the replicas must
 * follow the promoted one. As long as a service holds its own writes (sentinelHoldMaxMs).
 */
export const failoverPauseMs = sentinelHoldMaxMs;

/** What the watch asks the Sentinels (SentinelPoller): one round of their views. */
export interface SentinelSource {
  /** Sentinels in the URL. */
  readonly count: number;
  poll(): Promise<SentinelReplicaView[]>;
  /** Calls `listener` at each step of a failover a Sentinel publishes: channel, payload. */
  onFailoverEvent?(listener: (channel: string, message: string) => void): void;
  close(): void;
}

/** Why acknowledgements are held, and since when (epoch ms). */
export interface HeldAcknowledgements {
  reason: string;
  since: number;
}

export class FsyncPolicyWatch {
  private reason: string | undefined;
  /** Reads that failed in a row. */
  private failedReads = 0;
  private timer: ReturnType<typeof setInterval> | undefined;
  private replicaTimer: ReturnType<typeof setInterval> | undefined;
  private required = 1;
  /** Why the Sentinels' view forbids acknowledging on the watched server (replica-rule.ts). */
  private sentinelReason: string | undefined;
  /** The watched server, `ip:port` of the socket, as of the last count that read it. */
  private watched: string | undefined;
  /** The round in flight: a new one never starts before it ends. */
  private inFlight: Promise<void> | undefined;
  /** A failover step was published during the round in flight: another round follows it. */
  private recountAfter = false;
  /** Why every wait holds for a replica the count needs that is not acknowledging. */
  private waitingFor: string | undefined;
  private heldSince: number | undefined;
  /** Settles when the current hold ends; created by the first caller that waits for it. */
  private lifted: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(
    /** A connection of its own: a read must not queue behind a blocked durability wait. */
    private readonly valkey: Valkey,
    private readonly log: Logger,
    private readonly intervalMs = policyWatchIntervalMs,
    /** Asks the Sentinels about the primary and its replicas; absent without Sentinels. */
    private readonly sentinels?: SentinelSource,
    /**
     * On Valkey Cluster, a key of the partition's slot. INFO and CONFIG name no key, so no
     * MOVED reply would ever move this connection after the slot migrates: a keyed read before
     * each count gets the redirect that sends it to the slot's new owner, where the writer went.
     */
    private readonly slotProbeKey?: string,
  ) {}

  /** Why the policy no longer holds, or undefined while it does. */
  violation = (): string | undefined => this.reason ?? this.sentinelReason;

  /**
   * The server the replica count is for, `ip:port`: a wait that ran on another one (its
   * connection moved first, in a failover) is not covered by the count.
   */
  watchedNode = (): string | undefined => this.watched;

  /** Replica fsyncs a durability wait needs now (replica-rule.ts). */
  requiredReplicas = (): number => this.required;

  /** Why every durability wait is failing or waiting now, and since when; undefined: none. */
  held(): HeldAcknowledgements | undefined {
    const reason = this.violation() ?? this.waitingFor;
    if (reason === undefined) return undefined;
    return { reason, since: this.heldSince ?? Date.now() };
  }

  /**
   * Resolves when the hold on every wait ends (the Sentinels name this primary again, or the
   * replica the count waited for acknowledges): a service retries then instead of sitting out
   * a backoff grown during the outage. One promise per hold, however many wait on it.
   */
  holdLifted = (): Promise<void> => {
    if (this.lifted === undefined) {
      let resolve = (): void => undefined;
      const promise = new Promise<void>((settle) => {
        resolve = settle;
      });
      this.lifted = { promise, resolve };
    }
    return this.lifted.promise;
  };

  /** Starts or ends the held period after a round or a check changed the verdict. */
  private noteHeld(): void {
    const held = this.violation() !== undefined || this.waitingFor !== undefined;
    if (held) {
      this.heldSince ??= Date.now();
      return;
    }
    this.heldSince = undefined;
    this.lifted?.resolve();
    this.lifted = undefined;
  }

  /** What every durability wait on the watched datastore asks of this watch. */
  rule(): Required<DurabilityRule> {
    return {
      violation: this.violation,
      replicasRequired: this.requiredReplicas,
      watchedNode: this.watchedNode,
      holdLifted: this.holdLifted,
      sentinelsForbid: () => this.sentinelReason,
    };
  }

  /** Starts watching; resolves after the first count, so no wait runs on the default of 1. */
  async start(): Promise<void> {
    this.timer = setInterval(() => void this.check(), this.intervalMs);
    this.replicaTimer = setInterval(() => void this.countReplicas(), replicaWatchIntervalMs);
    this.sentinels?.onFailoverEvent?.((channel, message) => {
      // `master <name> <ip> <port>`: the server being failed over, and no other.
      const [kind, , host, port] = message.split(" ");
      const server =
        kind === "master" && host !== undefined ? { host, port: Number(port) } : undefined;
      if (server !== undefined && channel === "+try-failover") void this.pause(server, true);
      // A Sentinel not elected leader gives up while another goes on: only the leader's own
      // aborts end the failover.
      else if (
        server !== undefined &&
        channel.startsWith("-failover-abort") &&
        channel !== "-failover-abort-not-elected"
      )
        void this.pause(server, false);
      this.recount();
    });
    await this.countReplicas();
  }

  /**
   * A failover of the watched primary begins: its writes are paused (CLIENT PAUSE WRITE, which
   * blocks PUBLISH, so the Sentinels' hello messages too) until the replicas follow the
   * promoted one. Its replication offset then stops where the promoted replica's history
   * forks, so every replica resynchronises partially with the new primary, instead of in full
   * with an AOF rewrite, and waits are acknowledged again within milliseconds of the switch.
   * Sent on a connection of its own to the address the Sentinel names, never on the watch's:
   * that one may already have moved to the promoted replica, which must not be paused. A
   * primary that is down does not answer, which changes nothing. The pause ends by itself, or
   * (`pause` false) when the leader calls the failover off.
   */
  private async pause(server: { host: string; port: number }, pause: boolean): Promise<void> {
    const { username, password } = this.valkey.options;
    const client = probeClient({ ...server, username, password });
    const address = `${server.host}:${server.port}`;
    try {
      await client.connect();
      if (pause) {
        await client.call("CLIENT", "PAUSE", String(failoverPauseMs), "WRITE");
        this.log.info("a failover of the primary began: its writes are paused", { address });
      } else {
        await client.call("CLIENT", "UNPAUSE");
      }
    } catch (error) {
      // Down (the usual reason for a failover), or a user not allowed CLIENT PAUSE: the
      // failover goes on, and the replicas may have to resynchronise in full.
      if (pause)
        this.log.info("a failover of the primary began; its writes could not be paused", {
          address,
          error: (error as Error).message,
        });
    } finally {
      client.disconnect();
    }
  }

  /**
   * A round now, on a failover step a Sentinel published: after the round in flight, if one
   * is, since that round may have read the Sentinels before the step.
   */
  private recount(): void {
    if (this.inFlight === undefined) void this.countReplicas();
    else this.recountAfter = true;
  }

  /**
   * Re-counts the replicas a wait needs on the watched primary; a failed read keeps the count.
   * One round at a time: a call while one is in flight joins it, so a slow round can never
   * finish after, and overwrite, a newer one.
   */
  countReplicas(): Promise<void> {
    this.inFlight ??= this.countRound().finally(() => {
      this.inFlight = undefined;
      this.noteHeld();
      if (this.recountAfter) {
        this.recountAfter = false;
        void this.countReplicas();
      }
    });
    return this.inFlight;
  }

  private async countRound(): Promise<void> {
    try {
      if (this.slotProbeKey !== undefined) await this.valkey.exists(this.slotProbeKey);
      if (this.sentinels !== undefined) return await this.countWithSentinels(this.sentinels);
      const replication = parseInfo(await this.valkey.info("replication"));
      if (replication.get("role") !== "master") return;
      const limit = defaultReplicaLagLimitS;
      this.watched = nodeAddress(this.valkey);
      this.setRequired(requiredReplicaFsyncs(listedReplicas(replication), limit), {
        lagLimitSeconds: limit,
      });
    } catch {
      // A reconnect or a failover: the next read counts again.
    }
  }

  /**
   * The Sentinel rule: the watched server's listed replicas and the Sentinels' views, read in
   * one round, applied together (the node, its count and the verdict). With no Sentinel
   * answering nothing changes: a replica is never left out, and a refusal never lifted,
   * without their word; a connection that moved to another server meanwhile holds every wait.
   */
  private async countWithSentinels(sentinels: SentinelSource): Promise<void> {
    // Each reply with the connection it came on: a reconnect between them (a failover) may
    // have answered the two reads from two servers, and the round is then dropped.
    const read = (section: string) =>
      this.valkey.info(section).then((text) => ({
        fields: parseInfo(text),
        connection: connectionGeneration(this.valkey),
      }));
    const [replicationRead, serverRead, views] = await Promise.all([
      read("replication"),
      read("server"),
      sentinels.poll(),
    ]);
    const connection = replicationRead.connection;
    if (serverRead.connection !== connection || connectionGeneration(this.valkey) !== connection)
      return;
    const [replication, server] = [replicationRead.fields, serverRead.fields];
    const socket = nodeAddress(this.valkey);
    if (replication.get("role") !== "master" || socket === undefined) return;
    if (views.length === 0) {
      if (socket !== this.watched) {
        this.forbid(`no Sentinel answers to vouch for ${socket}, where this connection went`);
      }
      return;
    }
    // Sentinel names servers by the address they announce, which the socket's may not be.
    const watched = announcedAddress(views, server.get("run_id") ?? "") ?? socket;
    const listed: ListedReplica[] = listedReplicas(replication);
    const outcome = sentinelReplicaRule({ watched, listed, views, sentinels: sentinels.count });
    this.watched = socket;
    if (outcome.kind === "violated") return this.forbid(outcome.reason);
    if (this.sentinelReason !== undefined) {
      this.log.info("the Sentinels name this primary again; durability waits may succeed", {});
    }
    this.sentinelReason = undefined;
    this.setRequired(outcome.replicas, {
      counted: outcome.counted,
      excluded: outcome.excluded,
      standIns: outcome.standIns,
    });
    this.waitingFor = waitingFor(outcome, listed, views, sentinels.count);
  }

  private forbid(reason: string): void {
    if (this.sentinelReason === undefined) {
      this.log.warn("the Sentinels forbid acknowledging on this primary", { reason });
    }
    this.sentinelReason = reason;
  }

  private setRequired(required: number, why: Record<string, unknown>): void {
    if (required !== this.required) {
      this.log.info("durability waits need a new number of replica fsyncs", {
        from: this.required,
        to: required,
        ...why,
      });
    }
    this.required = required;
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
      this.noteHeld();
      return;
    }
    if (this.reason === undefined) {
      this.log.error(
        "appendfsync changed on the primary; nothing is acknowledged until it is always again",
        { appendfsync: value },
      );
    }
    this.reason = `appendfsync is ${value ?? "unreadable"} on the primary, not always`;
    this.noteHeld();
  }

  /** Stops reading and closes the connection. */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    if (this.replicaTimer !== undefined) clearInterval(this.replicaTimer);
    this.timer = undefined;
    this.replicaTimer = undefined;
    this.valkey.disconnect();
    this.sentinels?.close();
  }
}

/**
 * Why waits hold under a count, or undefined: a replica the count needs (one Sentinel could
 * promote, or a left-out one still acknowledging) that has not acknowledged for a second or
 * more cannot fsync now, and no wait succeeds until it does or the Sentinels flag it down
 * (down-after-milliseconds, which needs a majority of them answering).
 */
function waitingFor(
  outcome: Extract<SentinelRuleOutcome, { kind: "required" }>,
  listed: readonly ListedReplica[],
  views: readonly SentinelReplicaView[],
  sentinels: number,
): string | undefined {
  // The primary counts lag in whole seconds since the last acknowledgement (one a second).
  const acking = new Set(
    listed.filter((r) => r.state === "online" && r.lag <= 1).map((r) => `${r.ip}:${r.port}`),
  );
  const needed = outcome.counted.length === 0 ? [] : [...outcome.counted, ...outcome.standIns];
  const silent = needed.filter((address) => !acking.has(address));
  if (outcome.counted.length === 0 ? acking.size > 0 : silent.length === 0) return undefined;
  const epochs = [...new Set(views.map((v) => v.configEpoch))].join(",");
  const who = silent.length === 0 ? "no replica" : silent.join(", ");
  return (
    `waits need ${outcome.replicas} replica fsync(s); ${who} not acknowledging at the primary ` +
    `(Sentinels: ${views.length} of ${sentinels} answered, epoch ${epochs}; ` +
    `could promote: ${outcome.counted.join(", ") || "none"}; left out: ${outcome.excluded.join(", ") || "none"})`
  );
}

/** A watch on a connection of its own under `aof-replicated`; none under `memory`. */
export function watchFsyncPolicy(
  config: Config,
  log: Logger,
  connectionName: string,
): FsyncPolicyWatch | undefined {
  if (!waitsForReplicas(config)) return undefined;
  const slotKey = partitionKeys(config.partition).ownerEpoch;
  const valkey = createValkey(config.datastoreUrl, {
    name: connectionName,
    slotKey,
    commandTimeoutMs: 2000,
    lazy: true,
    sentinelPassword: config.sentinelPassword,
  });
  valkey.on("error", () => undefined); // an unreadable setting keeps the last answer
  const address = parseDatastoreAddress(config.datastoreUrl);
  if (typeof address === "object" && address.kind === "cluster") {
    return new FsyncPolicyWatch(valkey, log, policyWatchIntervalMs, undefined, slotKey);
  }
  if (typeof address !== "object" || address.kind !== "sentinel") {
    return new FsyncPolicyWatch(valkey, log, policyWatchIntervalMs);
  }
  const sentinels = new SentinelPoller(address, config.sentinelPassword);
  return new FsyncPolicyWatch(valkey, log, policyWatchIntervalMs, sentinels);
}

/**
 * /readyz with why acknowledgements are held and since when. Waiting for a replica Sentinel
 * could promote keeps the process ready (nothing is wrong with it) but degraded; a
 * violation is already a reason it is not ready.
 */
export function withHeldAcknowledgements(
  state: Readiness,
  watch: FsyncPolicyWatch | undefined,
): Readiness {
  const held = watch?.held();
  if (held === undefined) return state;
  const durabilityHeld = { reason: held.reason, since: new Date(held.since).toISOString() };
  if (state.status !== "ready") return { ...state, durabilityHeld };
  return {
    ...state,
    status: "degraded",
    reasons: [...state.reasons, `acknowledgements held: ${held.reason}`],
    durabilityHeld,
  };
}

/** The replica rule's live figure on /metrics: how many replica fsyncs each wait needs now. */
export function exposeReplicaRule(registry: MetricsRegistry, watch: FsyncPolicyWatch): void {
  registry.gauge(
    "matching_durability_replicas_required",
    "Replica fsyncs each durability wait needs now: every healthy replica, at least 1",
    () => watch.requiredReplicas(),
  );
  registry.gauge(
    "matching_durability_held_seconds",
    "Seconds every durability wait has been held by the replica rule or the policy watch (0: not held); /readyz says why",
    () => {
      const held = watch.held();
      return held === undefined ? 0 : (Date.now() - held.since) / 1000;
    },
  );
}
