/**
 * The `feed` boundary's report: a clean partition, a conductor, an outbox and a feed started
 * on the stack, the subscribers and the plain consumer run (feed-bench.ts), every client's
 * book compared with the conductor's at the end, and the feed's CPU over the run.
 */

import { createValkey } from "../src/infra/valkey/client";
import { type FeedBenchResult, runFeedBench } from "./feed-bench";
import { type BenchFeedClient, booksDiffering, subscribersCaughtUp } from "./feed-clients";
import { purgeCommandQueue, resetPartition } from "./pipeline-bench";
import { CpuWatch } from "./process-cpu";
import type { BenchReport } from "./report";
import { fetchMetrics, metricNumber, startService } from "./services";
import {
  describeDurability,
  intFlag,
  round,
  type StackContext,
  type StackReport,
} from "./stack-boundary";

const statement =
  "publish -> conductor -> outbox -> event exchanges -> matchd feed (its own queue, books in sequence order) -> WebSocket subscribers at depth 10, each keeping and verifying its book; beside them, in the same run, a plain RabbitMQ consumer of the same events. Latency from each command's scheduled send to each book update's arrival at a subscriber";

async function startServices(context: StackContext) {
  const { config, progress, run } = context;
  const valkey = createValkey(config.datastoreUrl, { name: "matchd-bench-feed" });
  await resetPartition(valkey, config.partition);
  await purgeCommandQueue(config.brokerUrl, config.partition);
  progress("starting conductor, outbox and feed");
  const conductor = await startService("conductor", context.serviceFlags, progress, run.register);
  const outbox = await startService("outbox", context.outboxFlags, progress, run.register);
  const feed = await startService("feed", context.serviceFlags, progress, run.register);
  return { valkey, conductor: conductor.url, outbox: outbox.url, feed: feed.url };
}

function invariantsOf(
  result: FeedBenchResult,
  differing: number,
  stalled: number,
  slowCut: number,
) {
  const clients = result.clients;
  const sum = (f: (c: BenchFeedClient) => number) => clients.reduce((n, c) => n + f(c), 0);
  const checks = {
    booksDifferingFromTheConductor: differing,
    checksumFailures: sum((c) => c.book.checksumFailures),
    sequenceGaps: sum((c) => c.book.chainBreaks),
    clientsCutOff: clients.filter((c) => c.closed !== undefined).length,
    stalledClientsNotCutOff: stalled - slowCut,
    resnapshots: sum((c) => c.book.snapshots - 1),
  };
  return { ok: Object.values(checks).every((v) => v === 0), ...checks };
}

export async function feedStackReport(context: StackContext): Promise<StackReport> {
  const { config, flags, progress, envFacts } = context;
  const services = await startServices(context);
  const rate = intFlag(flags, "--rate", 1000);
  const durationS = intFlag(flags, "--duration", 20);
  const subscribers = intFlag(flags, "--subscribers", 100);
  const stalled = intFlag(flags, "--stalled", 0);
  const workload = flags.get("--workload") ?? "alternating";
  const before = await fetchMetrics(services.feed);
  const cpu = CpuWatch.open([
    { name: "feed", url: services.feed },
    { name: "conductor", url: services.conductor },
    { name: "outbox", url: services.outbox },
  ]);
  const result = await runFeedBench(
    {
      ...config,
      feedUrl: services.feed,
      conductorUrl: services.conductor,
      workload,
      seed: intFlag(flags, "--seed", 1),
      rate,
      durationS,
      subscribers,
      stalled,
      progress,
    },
    (clients) => subscribersCaughtUp(services.feed, services.valkey, config.partition, clients),
  );
  const { seconds } = cpu.close();
  const after = await fetchMetrics(services.feed);
  const sent =
    metricNumber(after, "matching_feed_messages_sent") -
    metricNumber(before, "matching_feed_messages_sent");
  const differing = await booksDiffering(services.conductor, result.clients);
  const cut = metricNumber(after, "matching_feed_slow_clients_cut");
  const invariants = invariantsOf(result, differing, stalled, cut);
  for (const client of result.clients) client.close();
  services.valkey.disconnect();
  const feedMs = result.feedLatency.percentilesMs();
  const consumerMs = result.consumerLatency.percentilesMs();
  const report: BenchReport = {
    boundary: "feed",
    boundaryStatement: statement,
    durability: describeDurability(config, envFacts),
    workload: result.workload.name,
    workloadDescription: result.workload.description,
    commands: result.sent.commandIds.length,
    warmup: 0,
    seconds: round(result.sent.seconds, 3),
    commandsPerSecond: round(result.sent.commandIds.length / result.sent.seconds, 0),
    latencyMs: feedMs,
    invariants,
    checks: Object.keys(invariants).filter((k) => k !== "ok"),
    environment: envFacts,
    extra: {
      subscribers,
      "subscribers that stopped reading (cut off by the feed)": `${stalled} (${cut})`,
      pairs: result.workload.pairIds.length,
      "book updates received by subscribers": result.updatesReceived,
      "messages the feed sent (heartbeats included)": sent,
      "messages sent per second": round(sent / result.sent.seconds, 0),
      "plain RabbitMQ consumer, command's last event: p50 / p99 / p99.9 ms": `${consumerMs.p50} / ${consumerMs.p99} / ${consumerMs.p999}`,
      "feed subscriber, book update: p50 / p99 / p99.9 ms": `${feedMs.p50} / ${feedMs.p99} / ${feedMs.p999}`,
      "feed's added latency, p50 / p99 ms": `${round(feedMs.p50 - consumerMs.p50, 2)} / ${round(feedMs.p99 - consumerMs.p99, 2)}`,
      "feed CPU seconds (run)": seconds.feed ?? "not measured",
      "feed CPU per message sent, µs":
        seconds.feed === undefined || sent === 0
          ? "not measured"
          : round((seconds.feed * 1e6) / sent, 2),
      "feed CPU per subscriber, ms/s":
        seconds.feed === undefined
          ? "not measured"
          : round((seconds.feed * 1000) / subscribers / result.sent.seconds, 3),
      "conductor / outbox / bench CPU seconds": `${seconds.conductor ?? "?"} / ${seconds.outbox ?? "?"} / ${seconds.bench}`,
    },
  };
  progress(`feed: ${subscribers} subscribers, ${result.updatesReceived} updates verified`);
  return { report };
}
