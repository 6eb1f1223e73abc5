/**
 * `matchd outbox --partition N`: wires the lease, the stream, the broker publisher and
 * the delivery loop together, serves /healthz, /readyz and /metrics, and shuts down
 * gracefully on SIGTERM/SIGINT (stop reading, settle confirms, acknowledge, release).
 */

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Config } from "../config/schema";
import { allocatorSetting } from "../infra/allocator-env";
import { brokerRefusalAtBoot } from "../infra/amqp/connect";
import { awaitDurabilityPolicy, type BootProgress } from "../infra/boot";
import { ExitCode } from "../infra/exit-codes";
import { countCollections } from "../infra/gc-observer";
import { createHttpApp, type Readiness, serveHttp } from "../infra/http/app";
import type { Logger } from "../infra/log";
import { MetricsRegistry } from "../infra/metrics";
import { watchShutdown } from "../infra/shutdown";
import { createValkey, type Valkey } from "../infra/valkey/client";
import { FailoverTracker } from "../infra/valkey/failover-tracker";
import { outboxConsumerGroup, partitionKeys } from "../infra/valkey/keys";
import {
  exposeReplicaRule,
  watchFsyncPolicy,
  withHeldAcknowledgements,
} from "../infra/valkey/policy-watch";
import { withinMs } from "../infra/within";
import { DeliveryLoop } from "./delivery";
import { PartitionLease } from "./lease";
import { createOutboxMetrics } from "./metrics";
import { EventPublisher } from "./publisher";
import { OutboxStream } from "./stream-reader";

/**
 * Bound on the delivery loop's stop, above its own 10 s settle bound; the lease release
 * after it has a bound of its own (see below).
 */
const shutdownTimeoutMs = 15_000;

/** The lease keeper's command timeout: a quarter of the TTL, so renewals fail in time. */
function leaseCommandTimeoutMs(config: Config): number {
  return Math.max(250, Math.floor(config.outboxLeaseTtlMs / 4));
}

/** Every writer command is small; one unanswered this long means the server stopped answering. */
const writerCommandTimeoutMs = 10_000;

export async function runOutbox(config: Config, log: Logger): Promise<number> {
  // The first signal stops the outbox, later ones are ignored (see watchShutdown), also while
  // it waits for the datastore at boot.
  const shutdown = watchShutdown(log);
  // Checked once the datastore answers, with HTTP already serving (see below).
  let policyVerified = false;
  /** Why the boot still waits for the datastore, for /readyz. */
  const bootProgress: BootProgress = {};
  const partition = config.partition;
  const keys = partitionKeys(partition);
  // Unique per process: the lease owner and the consumer name, so a restarted outbox
  // re-reads nothing by accident and its predecessor's entries are claimed explicitly.
  const ownerId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  let loop: DeliveryLoop | undefined;
  const connections = ["control", "reader", "writer"].map((role) =>
    watchConnection(
      createValkey(config.datastoreUrl, {
        name: `matchd-outbox-p${partition}-${role}`,
        sentinelPassword: config.sentinelPassword,
        slotKey: keys.ownerEpoch,
        // The lease keeper's connection must not hang on a server that stopped answering, nor
        // the writer's: a hung acknowledgement would stop publishing (it waits once 20,000
        // confirmed events await theirs) with nothing failing. The reader's reads block.
        ...(role === "control" ? { commandTimeoutMs: leaseCommandTimeoutMs(config) } : {}),
        ...(role === "writer" ? { commandTimeoutMs: writerCommandTimeoutMs } : {}),
      }),
      role,
      log,
      () => loop?.datastoreReconnected(),
    ),
  );
  const [control, reader, writer] = connections as [Valkey, Valkey, Valkey];

  const policyWatch = watchFsyncPolicy(config, log, `matchd-outbox-p${partition}-policy`);
  const registry = new MetricsRegistry({ service: "outbox", partition: String(partition) });
  registry.setInfo("matching_durability_policy", { policy: config.durability });
  const metrics = createOutboxMetrics(registry, () => loop?.inFlight ?? 0);
  countCollections(registry);
  // The reader's: its reads and their durability waits are what a failover interrupts.
  const failovers = new FailoverTracker(reader, registry, log);
  if (policyWatch) exposeReplicaRule(registry, policyWatch);
  // Under aof-replicated an event leaves only once its commit is fsynced on primary and
  // replica, the same promise the conductor's acknowledgement makes for its command.
  const stream = new OutboxStream(
    reader,
    writer,
    keys,
    outboxConsumerGroup,
    ownerId,
    config.durability === "aof-replicated"
      ? {
          timeoutMs: config.durabilityTimeoutMs,
          observeWaitMs: (waitedMs) => {
            metrics.durabilityWait.observe(waitedMs / 1000);
            failovers.durableWrite();
          },
          ...policyWatch?.rule(),
        }
      : null,
  );
  const lease = new PartitionLease({
    valkey: control,
    key: keys.outboxLease,
    ownerId,
    ttlMs: config.outboxLeaseTtlMs,
    log,
    onChange: (held) => loop?.leaseChanged(held),
  });
  const deliveryLoop = new DeliveryLoop({
    stream,
    lease,
    metrics,
    log,
    window: config.outboxWindow,
    readCount: config.outboxReadCount,
    claimIdleMs: config.outboxClaimIdleMs,
    // A blocking read ends well within the lease's safety margin, so a read sent while the
    // lease was trusted cannot take entries after a successor may hold it.
    readBlockMs: Math.max(50, Math.min(1000, Math.floor(lease.safetyMarginMs / 2))),
    openPublisher: () =>
      EventPublisher.open(config.brokerUrl, `matchd-outbox-p${partition}`, log, (exchange) =>
        log.debug("event returned as unroutable", { exchange }),
      ),
    ...(policyWatch === undefined ? {} : { holdLifted: policyWatch.holdLifted }),
  });
  loop = deliveryLoop;

  const readiness = (): Readiness => {
    const reasons: string[] = [];
    if (!policyVerified) {
      reasons.push(
        `durability policy not verified yet${bootProgress.waitingFor === undefined ? "" : `: ${bootProgress.waitingFor}`}`,
      );
    }
    if (control.status !== "ready") reasons.push("datastore disconnected");
    const violated = policyWatch?.violation();
    if (violated !== undefined) reasons.push(violated);
    if (!lease.held()) {
      // A standby is ready: it is healthy and takes over when the holder goes away.
      if (reasons.length > 0) return { ready: false, status: "not-ready", reasons };
      return {
        ready: true,
        status: "ready",
        reasons: [`standby: lease held by ${lease.otherHolder ?? "nobody yet"}`],
        role: "standby",
      };
    }
    if (!deliveryLoop.brokerConnected) reasons.push("broker disconnected");
    const blocked = deliveryLoop.brokerBlocked;
    if (blocked !== null) reasons.push(`broker blocks publishing: ${blocked}`);
    if (reasons.length > 0) return { ready: false, status: "not-ready", reasons, role: "active" };
    if (deliveryLoop.unroutableExchange !== null) {
      return {
        ready: true,
        status: "degraded",
        reasons: [
          `events to ${deliveryLoop.unroutableExchange} are unroutable: bind a queue to it`,
        ],
        role: "active",
      };
    }
    return { ready: true, status: "ready", reasons: [], role: "active" };
  };

  const beforeMetrics = async (): Promise<void> => {
    const stats = await stream.stats(control);
    if (!stats) return;
    metrics.pending.set(stats.pending);
    metrics.streamLength.set(stats.length);
    metrics.streamLagSeconds.set(
      stats.oldestEntryMs === null ? 0 : Math.max(0, (Date.now() - stats.oldestEntryMs) / 1000),
    );
  };

  const server = serveHttp(
    createHttpApp({
      metrics: registry,
      readiness: () => withHeldAcknowledgements(readiness(), policyWatch),
      beforeMetrics,
    }),
    config.httpPort,
    config.httpHost,
  );
  log.info("outbox started", {
    owner: ownerId,
    httpPort: server.port,
    window: config.outboxWindow,
    readCount: config.outboxReadCount,
    leaseTtlMs: config.outboxLeaseTtlMs,
    claimIdleMs: config.outboxClaimIdleMs,
    allocator: allocatorSetting(),
  });

  // The contract's /metrics answers while a dependency is down: the policy is checked once
  // the datastore answers; one that answers and cannot honour it ends the boot (exit 3).
  const verified = await awaitDurabilityPolicy(
    config,
    log,
    shutdown.reason,
    {},
    bootProgress,
  ).catch(async (error: unknown) => {
    await server.stop();
    for (const connection of connections) connection.disconnect();
    policyWatch?.stop();
    throw error;
  });
  if (!verified) {
    log.info("outbox stopping before it started");
    await server.stop();
    for (const connection of connections) connection.disconnect();
    policyWatch?.stop();
    return ExitCode.ok;
  }
  // Wrong credentials or a missing vhost end the boot (exit 5) rather than being retried as
  // an unreachable broker; an unreachable one is retried by the delivery loop.
  const refused = await brokerRefusalAtBoot(config.brokerUrl, `matchd-outbox-p${partition}-boot`);
  if (refused !== null) {
    await server.stop();
    for (const connection of connections) connection.disconnect();
    policyWatch?.stop();
    throw refused;
  }
  policyVerified = true;
  await policyWatch?.start();
  lease.start();
  const running = deliveryLoop.start();
  // A loop that ends by itself (it should not), or fails, also ends the process, through the
  // same stop (the lease released), with exit 1.
  running.then(
    () => shutdown.stop("loop ended"),
    (error: unknown) => {
      log.error("delivery loop failed", { error });
      shutdown.stop("loop ended");
    },
  );
  const signal = await shutdown.reason;
  log.info("outbox shutting down", { signal });
  const stopped =
    (await withinMs(
      // A loop that failed fails its stop too: the lease is released all the same.
      deliveryLoop.stop().then(
        () => true,
        () => false,
      ),
      shutdownTimeoutMs,
    )) === true;
  if (!stopped) log.warn("shutdown did not finish in time; closing anyway", { shutdownTimeoutMs });
  // Released in any case (a broker that stopped answering can hold up the loop's stop), with
  // its own bound, longer than one keeper command may take: a successor should not have to
  // wait out the lease's TTL.
  await withinMs(lease.release(), leaseCommandTimeoutMs(config) + 1000);
  await server.stop();
  for (const connection of connections) connection.disconnect();
  policyWatch?.stop();
  log.info("outbox stopped");
  // A loop that ended by itself is a failure a supervisor must see.
  return signal === "loop ended" ? 1 : 0;
}

/**
 * Logs connection trouble once per episode instead of letting ioredis print every retry, and
 * reports reconnects: every one of the reader's, also with no error before it (a server or
 * proxy that closed the connection cleanly), whose lost read may have moved entries into the
 * pending list; the other connections' after an error.
 */
function watchConnection(
  valkey: Valkey,
  role: string,
  log: Logger,
  onRestored: () => void,
): Valkey {
  let down = false;
  let connectedBefore = false;
  valkey.on("error", (error: Error) => {
    if (down) return;
    down = true;
    log.warn("datastore connection error", { role, error });
  });
  valkey.on("ready", () => {
    // Only a reader can lose a read to a clean close; the others restart the session after
    // an error, as before (an idle writer closed by a proxy would otherwise restart it often).
    if (connectedBefore && (down || role === "reader")) {
      log.info("datastore connection restored", { role, afterError: down });
      onRestored();
    }
    connectedBefore = true;
    down = false;
  });
  return valkey;
}
