/**
 * The outbox-drain boundary benchmark: build a backlog of N realistic event envelopes
 * in one partition's stream, start an outbox on it, and time how long it takes until
 * the stream is empty AND sink queues bound to every event exchange have received every
 * event. Reports events/s with its invariants (duplicates, retries, dead letters).
 *
 * Usage (wired by `matchd bench outbox-drain`):
 *   runOutboxDrainBench({ config, events: 100_000, window: 2000,
 *     startOutbox: (extraArgs) => spawn `matchd outbox --partition P ...extraArgs`
 *       and resolve once its /healthz answers, with its /metrics URL and a stop() })
 * The caller owns the servers; this function deletes the partition's keys first, so
 * no other outbox or conductor may be running on that partition.
 */
import Redis from "ioredis";
import type { Config } from "../src/config/schema";
import { eventIdOf } from "../src/domain/events";
import { connectedReplicas } from "../src/infra/valkey/client";
import { outboxConsumerGroup, partitionKeys } from "../src/infra/valkey/keys";
import { EventSink } from "./event-sink";

export interface OutboxDrainOptions {
  config: Config;
  /** Backlog size. */
  events: number;
  /** Confirm window passed to the outbox as --window (1 = publish and await each confirm). */
  window: number;
  /** Starts an outbox for config.partition with the extra flags; resolves once it answers /healthz. */
  startOutbox: (extraArgs: string[]) => Promise<{ stop(): Promise<void>; metricsUrl: string }>;
  log?: (line: string) => void;
  /** Gives up after this long; default scales with the backlog (at least 60 s). */
  timeoutMs?: number;
  /**
   * "queued": the drain ends when the stream is empty and the sink's queue holds every event;
   * the sink reads and checks them after the timed window. "live" (the default): the sink
   * consumes during the drain, and the drain ends when it has received every event.
   */
  sink?: SinkMode;
}

export type SinkMode = "live" | "queued";

const xaddChunk = 5000;

/**
 * The benchmark workload's event mix, repeated: a resting bid (1 event), then an ask
 * that fills it (maker filled, taker filled, deal executed) — 2 commands, 4 events.
 */
export function buildEnvelope(partition: number, runId: string, n: number): string {
  const command = Math.floor(n / 4) * 2 + (n % 4 === 0 ? 0 : 1);
  const commandId = `${runId}-${command}`;
  const ordinal = n % 4 === 0 ? 0 : (n % 4) - 1;
  const type =
    n % 4 === 0 ? "order.rested.v1" : n % 4 === 3 ? "deal.executed.v1" : "order.filled.v1";
  const occurredAt = new Date(1_700_000_000_000 + command).toISOString();
  const bidId = `${runId}-o${command - (n % 4 === 0 ? 0 : 1)}`;
  const askId = `${runId}-o${command}`;
  const payload =
    type === "order.rested.v1"
      ? {
          orderId: bidId,
          userId: "1001",
          pairId: 1,
          side: "bid",
          price: "100",
          volume: "1",
          volumeTotal: "1",
          executedVolume: "0",
        }
      : type === "order.filled.v1"
        ? {
            orderId: ordinal === 0 ? bidId : askId,
            userId: ordinal === 0 ? "1001" : "1002",
            pairId: 1,
            side: ordinal === 0 ? "bid" : "ask",
            price: "100",
            volumeTotal: "1",
            executedVolume: "1",
            role: ordinal === 0 ? "maker" : "taker",
          }
        : {
            dealId: `${commandId}:deal:0`,
            pairId: 1,
            price: "100",
            volume: "1",
            quoteVolume: "100",
            makerOrderId: bidId,
            takerOrderId: askId,
            makerUserId: "1001",
            takerUserId: "1002",
            takerSide: "ask",
          };
  return JSON.stringify({
    schemaVersion: 1,
    eventId: eventIdOf(commandId, ordinal, type),
    type,
    partition,
    pairId: 1,
    commandId,
    correlationId: commandId,
    ordinal,
    occurredAt,
    payload,
  });
}

async function deleteKeys(valkey: Redis, prefix: string): Promise<number> {
  let cursor = "0";
  let deleted = 0;
  do {
    const [next, keys] = await valkey.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) deleted += await valkey.del(...keys);
  } while (cursor !== "0");
  return deleted;
}

interface HistogramJson {
  count?: number;
  p50?: number;
  p95?: number;
  p99?: number;
  p999?: number;
  max?: number;
}

/** The drain's report: its timings, what the sink received, and the outbox's own figures. */
function drainReport(
  { config, events, window, sink: sinkMode = "live" }: OutboxDrainOptions,
  sink: EventSink,
  metrics: Record<string, unknown>,
  t: {
    backlogSeconds: number;
    started: number;
    ready: number;
    drainStart: number;
    drainSeconds: number;
    receiveSeconds: number | undefined;
  },
  replicaFigures: Record<string, number | undefined>,
): Record<string, unknown> {
  const queued = sinkMode === "queued";
  const latency = (metrics.matching_outbox_confirm_latency_seconds ?? {}) as HistogramJson;
  const { backlogSeconds, started, ready, drainStart, drainSeconds, receiveSeconds } = t;
  return {
    boundary: "outbox-drain",
    events,
    window,
    sink: sinkMode,
    readCount: config.outboxReadCount,
    durability: config.durability,
    backlogWriteSeconds: round(backlogSeconds),
    outboxStartSeconds: round((ready - started) / 1000),
    firstReadSeconds: round((drainStart - started) / 1000),
    drainSeconds: round(drainSeconds),
    // A queued sink receives after the window: its read time is reported instead.
    lastEventSeconds: queued ? undefined : round((sink.lastReceivedAt - drainStart) / 1000),
    firstEventSeconds: queued ? undefined : round((sink.firstReceivedAt - drainStart) / 1000),
    sinkReadSeconds: receiveSeconds,
    eventsPerSecond: Math.round(events / drainSeconds),
    received: sink.received,
    duplicates: sink.duplicates,
    foreignMessages: sink.foreign,
    confirmLatencySeconds: {
      p50: latency.p50,
      p95: latency.p95,
      p99: latency.p99,
      p999: latency.p999,
      max: latency.max,
      count: latency.count,
    },
    publishRetries: metrics.matching_outbox_publish_retries_total,
    deadLetters: metrics.matching_outbox_dead_letter_total,
    unroutable: metrics.matching_outbox_unroutable_total,
    published: metrics.matching_outbox_events_published_total,
    durabilityTimeouts: metrics.matching_outbox_durability_timeouts_total,
    // Sampled every 250 ms from the first read to the end of the drain.
    ...replicaFigures,
  };
}

/** The backlog: `events` entries appended as the commit appends them, in pipelined chunks. */
async function writeBacklog(valkey: Redis, partition: number, runId: string, events: number) {
  const keys = partitionKeys(partition);
  const backlogStarted = performance.now();
  for (let from = 0; from < events; from += xaddChunk) {
    const pipeline = valkey.pipeline();
    for (let n = from; n < Math.min(events, from + xaddChunk); n++) {
      // With `seq`, as the commit writes entries: the outbox sends it as a header.
      pipeline.xadd(keys.events, "*", "event", buildEnvelope(partition, runId, n), "seq", n + 1);
    }
    await pipeline.exec();
  }
  const backlogSeconds = (performance.now() - backlogStarted) / 1000;
  return { backlogSeconds, backlogLength: await valkey.xlen(keys.events) };
}

/**
 * Under aof-replicated the replica must stay attached throughout: the outbox's durability
 * wait would stall without it, and a run that stalled must not read as a clean one. Sampled
 * at most every 250 ms; a failed sample is a gap, as in the pipeline benches.
 */
function replicaSampler(config: Config, valkey: Redis) {
  const replicated = config.durability === "aof-replicated";
  let min = Number.POSITIVE_INFINITY;
  let samples = 0;
  let nextAt = 0;
  return {
    sample: async () => {
      if (!replicated || performance.now() < nextAt) return;
      nextAt = performance.now() + 250;
      try {
        min = Math.min(min, await connectedReplicas(valkey));
        samples++;
      } catch {
        // No sample at all fails the run (the report says none).
      }
    },
    figures: () => ({
      // Sampled every 250 ms from the first read to the end of the drain.
      replicaSamples: replicated ? samples : undefined,
      minReplicasConnected: replicated && samples > 0 ? min : undefined,
    }),
  };
}

/** Outside the timed window: reads a queued sink and checks every event arrived, each once. */
async function readQueuedSink(
  sink: EventSink,
  events: number,
  started: number,
  timeoutMs: number,
): Promise<number> {
  const readStarted = performance.now();
  await sink.startReceiving();
  while (sink.received < events) {
    if (performance.now() - started > timeoutMs) {
      throw new Error(
        `the sink read ${sink.received} of ${events} events from its queue within ${timeoutMs} ms`,
      );
    }
    sink.throwIfFailed();
    await Bun.sleep(10);
  }
  return round((performance.now() - readStarted) / 1000);
}

export async function runOutboxDrainBench(
  options: OutboxDrainOptions,
): Promise<Record<string, unknown>> {
  const { config, events, window, startOutbox } = options;
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.timeoutMs ?? Math.max(60_000, events * 2);
  const partition = config.partition;
  const keys = partitionKeys(partition);
  const runId = `bench-${Date.now().toString(36)}`;
  const valkey = new Redis(config.datastoreUrl, { maxRetriesPerRequest: 1 });
  let sink: EventSink | undefined;
  let outbox: { stop(): Promise<void>; metricsUrl: string } | undefined;
  try {
    await deleteKeys(valkey, keys.prefix);

    // Each event's command number is below `events` (2 commands per 4 events).
    const sinkMode = options.sink ?? "live";
    const queued = sinkMode === "queued";
    sink = await EventSink.open(config.brokerUrl, runId, events, { deferred: queued });

    const { backlogSeconds, backlogLength } = await writeBacklog(valkey, partition, runId, events);
    log(
      `backlog of ${backlogLength} events written in ${backlogSeconds.toFixed(2)} s; starting the outbox (window ${window})`,
    );

    // The outbox starts reading before the bench sees /readyz (polled every 100 ms), so the
    // timer starts at the last moment the consumer group was seen with nothing read yet.
    const started = performance.now();
    const firstRead = watchFirstRead(valkey, keys.events);
    // Awaited below; this only keeps a failed start from leaving it unhandled.
    firstRead.catch(() => undefined);
    outbox = await startOutbox(["--window", String(window)]);
    const ready = performance.now();
    const drainStart = await firstRead;
    let length = backlogLength;
    // A queued sink's count is read only once the stream is empty: until then it cannot be full.
    let inQueue = 0;
    const receiving = sink;
    const arrived = (): number => (queued ? inQueue : receiving.received);
    let nextReport = ready + 1000;
    const replicas = replicaSampler(config, valkey);
    const sampleReplicas = replicas.sample;
    await sampleReplicas();
    while (length > 0 || arrived() < events) {
      if (performance.now() - started > timeoutMs) {
        throw new Error(
          `outbox drain timed out after ${timeoutMs} ms: XLEN ${length}, ${queued ? "queued" : "received"} ${arrived()} of ${events}`,
        );
      }
      sink.throwIfFailed();
      await Bun.sleep(10);
      length = await valkey.xlen(keys.events);
      await sampleReplicas();
      if (queued && length === 0) inQueue = await sink.queued();
      if (performance.now() >= nextReport) {
        log(`XLEN ${length}, ${queued ? "queued" : "received"} ${arrived()} of ${events}`);
        nextReport += 1000;
      }
    }
    const drained = performance.now();
    const receiveSeconds = queued
      ? await readQueuedSink(sink, events, started, timeoutMs)
      : undefined;
    const metrics = (await (await fetch(outbox.metricsUrl)).json()) as Record<string, unknown>;
    const drainSeconds = (drained - drainStart) / 1000;
    const times = { backlogSeconds, started, ready, drainStart, drainSeconds, receiveSeconds };
    const report = drainReport(options, sink, metrics, times, replicas.figures());
    log(
      `drained ${events} events in ${drainSeconds.toFixed(2)} s: ${report.eventsPerSecond} events/s`,
    );
    return report;
  } finally {
    await outbox?.stop().catch(() => undefined);
    await sink?.close().catch(() => undefined);
    valkey.disconnect();
  }
}

/**
 * Polls the outbox's consumer group every 5 ms until it has read something (its last-delivered
 * id moves from 0-0); resolves with the time of the last poll that saw nothing read, so the
 * drain window can only be longer than the true one, by at most one poll.
 */
async function watchFirstRead(valkey: Redis, stream: string): Promise<number> {
  let unreadAt = performance.now();
  const deadline = unreadAt + 120_000;
  while (performance.now() < deadline) {
    const polledAt = performance.now();
    const groups = (await valkey.xinfo("GROUPS", stream)) as unknown[][];
    const group = groups.find(
      (fields) => fields[fields.indexOf("name") + 1] === outboxConsumerGroup,
    );
    const lastDelivered = group?.[group.indexOf("last-delivered-id") + 1];
    if (group !== undefined && lastDelivered !== "0-0") return unreadAt;
    unreadAt = polledAt;
    await Bun.sleep(5);
  }
  throw new Error("the outbox read nothing from the stream within 120 s");
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
