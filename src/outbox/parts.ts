/**
 * The parts an outbox process runs on (three datastore connections, the policy watch, the
 * metrics, the stream, the lease and the delivery loop), each registered with its cleanup on
 * one stack as it opens: disposing the stack closes them in reverse order.
 */

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Config } from "../config/schema";
import { durabilityWaitMs } from "../infra/durability-policy";
import { countCollections } from "../infra/gc-observer";
import type { Logger } from "../infra/log";
import { MetricsRegistry } from "../infra/metrics";
import { createValkey, type Valkey } from "../infra/valkey/client";
import { FailoverTracker } from "../infra/valkey/failover-tracker";
import { outboxConsumerGroup, partitionKeys } from "../infra/valkey/keys";
import {
  exposeReplicaRule,
  type FsyncPolicyWatch,
  watchFsyncPolicy,
} from "../infra/valkey/policy-watch";
import { DeliveryLoop } from "./delivery";
import { PartitionLease } from "./lease";
import { createOutboxMetrics, type OutboxMetrics } from "./metrics";
import { EventPublisher } from "./publisher";
import { OutboxStream, type ReadDurability } from "./stream-reader";

/** The lease keeper's command timeout: a quarter of the TTL, so renewals fail in time. */
export function leaseCommandTimeoutMs(config: Config): number {
  return Math.max(250, Math.floor(config.outboxLeaseTtlMs / 4));
}

/** Every writer command is small; one unanswered this long means the server stopped answering. */
const writerCommandTimeoutMs = 10_000;

export interface OutboxParts {
  /** The lease owner and the consumer name (see openOutboxParts). */
  ownerId: string;
  control: Valkey;
  policyWatch: FsyncPolicyWatch | undefined;
  registry: MetricsRegistry;
  metrics: OutboxMetrics;
  stream: OutboxStream;
  lease: PartitionLease;
  loop: DeliveryLoop;
}

/** The four datastore connections, each watched (watchConnection) and closed on cleanup. */
function openConnections(
  config: Config,
  log: Logger,
  cleanup: AsyncDisposableStack,
  onRestored: () => void,
): [control: Valkey, reader: Valkey, reader2: Valkey, writer: Valkey] {
  const keys = partitionKeys(config.partition);
  const roles = ["control", "reader", "reader2", "writer"] as const;
  const [control, reader, reader2, writer] = roles.map((role) => {
    const client = createValkey(config.datastoreUrl, {
      name: `matchd-outbox-p${config.partition}-${role}`,
      sentinelPassword: config.sentinelPassword,
      slotKey: keys.ownerEpoch,
      // The lease keeper's connection must not hang on a server that stopped answering, nor
      // the writer's: a hung acknowledgement would stop publishing (it waits once 20,000
      // confirmed events await theirs) with nothing failing. The reader's reads block.
      ...(role === "control" ? { commandTimeoutMs: leaseCommandTimeoutMs(config) } : {}),
      ...(role === "writer" ? { commandTimeoutMs: writerCommandTimeoutMs } : {}),
    });
    cleanup.defer(() => client.disconnect());
    return watchConnection(client, role, log, onRestored);
  }) as [Valkey, Valkey, Valkey, Valkey];
  return [control, reader, reader2, writer];
}

export function openOutboxParts(
  config: Config,
  log: Logger,
  cleanup: AsyncDisposableStack,
): OutboxParts {
  const partition = config.partition;
  const keys = partitionKeys(partition);
  // Unique per process: the lease owner and the consumer name, so a restarted outbox
  // re-reads nothing by accident and its predecessor's entries are claimed explicitly.
  const ownerId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  let loop: DeliveryLoop | undefined;
  // Reads of new entries alternate between the two readers (see OutboxStream.readNewOn).
  const [control, reader, reader2, writer] = openConnections(config, log, cleanup, () =>
    loop?.datastoreReconnected(),
  );
  const policyWatch = watchFsyncPolicy(config, log, `matchd-outbox-p${partition}-policy`);
  if (policyWatch) cleanup.defer(() => policyWatch.stop());
  const registry = new MetricsRegistry({ service: "outbox", partition: String(partition) });
  registry.setInfo("matching_durability_policy", { policy: config.durability });
  const metrics = createOutboxMetrics(registry, () => loop?.inFlight ?? 0);
  countCollections(registry);
  // The reader's: its reads and their durability waits are what a failover interrupts.
  const failovers = new FailoverTracker(reader, registry, log);
  if (policyWatch) exposeReplicaRule(registry, policyWatch);
  const durability = readDurability(config, metrics, failovers, policyWatch);
  const stream = new OutboxStream(
    reader,
    writer,
    keys,
    outboxConsumerGroup,
    ownerId,
    durability,
    reader2,
  );
  const lease = new PartitionLease({
    valkey: control,
    key: keys.outboxLease,
    ownerId,
    ttlMs: config.outboxLeaseTtlMs,
    log,
    onChange: (held) => loop?.leaseChanged(held),
  });
  loop = new DeliveryLoop({
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
    ...(policyWatch === undefined
      ? {}
      : {
          holdLifted: policyWatch.holdLifted,
          sentinelsForbid: policyWatch.rule().sentinelsForbid,
        }),
  });
  return { ownerId, control, policyWatch, registry, metrics, stream, lease, loop };
}

/**
 * Under aof-replicated an event leaves only once its commit is fsynced on primary and
 * replica, the same promise the conductor's acknowledgement makes for its command; null
 * under the memory policy.
 */
function readDurability(
  config: Config,
  metrics: OutboxMetrics,
  failovers: FailoverTracker,
  policyWatch: FsyncPolicyWatch | undefined,
): ReadDurability | null {
  const waitMs = durabilityWaitMs(config);
  if (waitMs === undefined) return null;
  return {
    timeoutMs: waitMs,
    observeWaitMs: (waitedMs: number) => {
      metrics.durabilityWait.observe(waitedMs / 1000);
      failovers.durableWrite();
    },
    ...policyWatch?.rule(),
  };
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
    if (connectedBefore && (down || role === "reader" || role === "reader2")) {
      log.info("datastore connection restored", { role, afterError: down });
      onRestored();
    }
    connectedBefore = true;
    down = false;
  });
  return valkey;
}
