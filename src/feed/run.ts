/**
 * `matchd feed --partition N`: the partition's market data as a process. It reads only (any
 * number may run per partition, all active), keeps every book of the partition from a durable
 * snapshot and the published events, and serves them over WebSocket, REST and a live page.
 */

import type { Config } from "../config/schema";
import { awaitDurabilityPolicy } from "../infra/boot";
import { ExitCode } from "../infra/exit-codes";
import { serveHttp } from "../infra/http/app";
import type { Logger } from "../infra/log";
import { MetricsRegistry } from "../infra/metrics";
import { watchShutdown } from "../infra/shutdown";
import { createValkey } from "../infra/valkey/client";
import { partitionKeys } from "../infra/valkey/keys";
import { watchFsyncPolicy } from "../infra/valkey/policy-watch";
import { withinMs } from "../infra/within";
import { feedApp, feedWebSocket } from "./app";
import { closeCodes } from "./hub";
import { FeedService } from "./service";

const stopTimeoutMs = 5000;

function feedMetrics(registry: MetricsRegistry, service: FeedService): void {
  const { hub, feed, status } = service;
  registry.gauge(
    "matching_feed_connections",
    "WebSocket connections open",
    () => hub.connections.size,
  );
  registry.gauge(
    "matching_feed_sequence",
    "The partition sequence number the books reflect",
    () => feed.seq,
  );
  registry.gauge("matching_feed_events_held", "Events held behind a sequence gap", () => feed.held);
  registry.gauge(
    "matching_feed_messages_sent",
    "Messages sent to clients (a counter)",
    () => hub.counters.messagesSent,
  );
  registry.gauge(
    "matching_feed_slow_clients_cut",
    "Clients cut off for leaving too much unread (a counter)",
    () => hub.counters.slowClientsCut,
  );
  registry.gauge(
    "matching_feed_resyncs",
    "Snapshots loaded: the first, then one per lost source or stuck gap (a counter)",
    () => status.resyncs,
  );
  registry.gauge(
    "matching_feed_client_snapshots",
    "Snapshots sent to subscribers (a counter)",
    () => hub.counters.snapshots,
  );
  registry.gauge(
    "matching_feed_client_resumes",
    "Subscriptions resumed from kept messages (a counter)",
    () => hub.counters.resumes,
  );
}

export async function runFeed(config: Config, log: Logger): Promise<number> {
  const shutdown = watchShutdown(log);
  const cleanup = new AsyncDisposableStack();
  try {
    const valkey = createValkey(config.datastoreUrl, {
      name: `matchd-feed-p${config.partition}`,
      sentinelPassword: config.sentinelPassword,
      slotKey: partitionKeys(config.partition).ownerEpoch,
      commandTimeoutMs: 10_000,
    });
    cleanup.defer(() => valkey.disconnect());
    // Said once per outage: ioredis reports every failed reconnect.
    let down = false;
    valkey.on("error", (error: Error) => {
      if (!down) log.warn("datastore connection error", { error });
      down = true;
    });
    valkey.on("ready", () => {
      down = false;
    });
    const policyWatch = watchFsyncPolicy(config, log, `matchd-feed-p${config.partition}-policy`);
    if (policyWatch) cleanup.defer(() => policyWatch.stop());
    const service = new FeedService(config, valkey, () => policyWatch?.rule() ?? {}, log);
    const registry = new MetricsRegistry({ service: "feed", partition: String(config.partition) });
    feedMetrics(registry, service);
    const server = serveHttp(
      feedApp(service, registry),
      config.httpPort,
      config.httpHost,
      feedWebSocket(config.feedClientBufferBytes),
    );
    cleanup.defer(() => server.stop());
    service.hub.publishToTopic = server.publish;
    log.info("feed started", { httpPort: server.port });
    if (!(await awaitDurabilityPolicy(config, log, shutdown.reason))) return ExitCode.ok;
    await policyWatch?.start();
    // Bounded: a snapshot under way against a datastore that went away must not hold the exit.
    cleanup.defer(() => withinMs(service.stop(), stopTimeoutMs));
    cleanup.defer(() => {
      for (const connection of [...service.hub.connections]) {
        service.hub.close(connection, closeCodes.stopping, "the feed is stopping");
      }
    });
    void service.start();
    log.info("feed shutting down", { signal: await shutdown.reason });
  } finally {
    await cleanup.disposeAsync();
  }
  return ExitCode.ok;
}
