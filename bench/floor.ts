/**
 * The floor of a command's path, measured in the same invocation, at the same offered rate,
 * on the same stack: each leg alone, as a bare client on this runtime does it.
 * - broker in: publish with confirms -> the command queue's type -> a consumer that only
 *   acknowledges (bench/broker-floor.ts);
 * - datastore: the conductor's commit shape (HSET, ZADD, XADD, SET EX a command) grouped as
 *   the conductor groups them (every command due while the last commit waited), then its
 *   durability wait (`WAITAOF 1 R` in slices, R: the replicas connected);
 * - reply (the round trip): a publish to an exclusive queue read by the bench's consumer;
 * - outbox (the full pipeline): an XADD, read by a consumer group (XREADGROUP), published with
 *   confirms to an exchange, acknowledged in the stream (XACK, XDEL) once confirmed, and
 *   received by the bench's consumer.
 * Their p50s and p99s summed are what the path could cost if matchd added nothing; the report
 * divides the path's by them. Percentiles do not add, so the sum of p99s is a generous floor.
 */

import type { ConfirmChannel } from "amqplib";
import type { Config } from "../src/config/schema";
import { connectBroker } from "../src/infra/amqp/connect";
import { FramePublisher } from "../src/infra/amqp/fast-publish";
import { connectedReplicas, createValkey, type Valkey } from "../src/infra/valkey/client";
import { waitDurable } from "../src/infra/valkey/durability";
import { partitionKeys } from "../src/infra/valkey/keys";
import { withinMs } from "../src/infra/within";
import { runBrokerFloor } from "./broker-floor";
import { buildTransaction, deleteKeySpaces, execCommits } from "./datastore-bench";
import { LatencyHistogram, type Percentiles } from "./histogram";
import { LeanConsumer } from "./lean-consumer";
import { sleepUntil } from "./pace";

export interface FloorLeg {
  name: string;
  latencyMs: Percentiles;
  samples: number;
}

export interface Floor {
  legs: FloorLeg[];
  sum: { p50: number; p99: number };
}

export interface FloorOptions {
  config: Config;
  rate: number;
  /** Timed sends per leg. */
  samples: number;
  seed: number;
  progress: (line: string) => void;
}

/** The legs of `path`, one after another (never two at once). */
export async function measureFloor(
  path: "round-trip" | "full-pipeline",
  options: FloorOptions,
): Promise<Floor> {
  const { config, rate, samples, seed, progress } = options;
  const last = path === "round-trip" ? "reply" : "outbox";
  progress(`floor: the broker, datastore and ${last} legs alone, ${samples} each at ${rate}/s`);
  const warmup = Math.min(samples, 200);
  const broker = await runBrokerFloor({
    brokerUrl: config.brokerUrl,
    commands: samples,
    warmup,
    seed,
    prefetch: config.prefetch,
    ackEvery: config.batchMax,
    rate,
    progress: () => undefined,
  });
  const legs: FloorLeg[] = [
    { name: "broker in", latencyMs: broker.latencyMs, samples: broker.received - warmup },
    await datastoreLeg(config, rate, samples),
    path === "round-trip"
      ? await replyLeg(config, rate, samples)
      : await outboxLeg(config, rate, samples),
  ];
  const sum = (key: "p50" | "p99") =>
    Math.round(legs.reduce((total, leg) => total + leg.latencyMs[key], 0) * 1000) / 1000;
  return { legs, sum: { p50: sum("p50"), p99: sum("p99") } };
}

/** Sends `samples` at `rate` from a schedule; `send(i)` resolves when its leg is done. */
async function paced(
  rate: number,
  samples: number,
  send: (i: number) => Promise<void>,
): Promise<LatencyHistogram> {
  const histogram = new LatencyHistogram();
  const start = performance.now() + 20;
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < samples; i++) {
    const due = start + (i * 1000) / rate;
    await sleepUntil(due);
    inFlight.push(send(i).then(() => histogram.record((performance.now() - due) * 1e6)));
  }
  // A send that never completes (a lost reply) is left out of the histogram, not waited for.
  await withinMs(Promise.all(inFlight), 10_000);
  return histogram;
}

/**
 * A group commit, as the conductor's: one transaction holds every command due by the time
 * the last one's wait ended, then one durability wait; each command is charged from its
 * schedule. One connection: a partition commits in order, and a WAITAOF blocks its connection.
 */
async function datastoreLeg(config: Config, rate: number, samples: number): Promise<FloorLeg> {
  const keys = partitionKeys(990);
  const valkey = createValkey(config.datastoreUrl, { name: "matchd-bench-floor-datastore" });
  try {
    const replicas = config.durability === "aof-replicated" ? await connectedReplicas(valkey) : 0;
    const transactions = Array.from({ length: samples }, (_, i) => buildTransaction(0, i));
    const histogram = new LatencyHistogram();
    const start = performance.now() + 20;
    const due = (i: number) => start + (i * 1000) / rate;
    let batches = 0;
    for (let next = 0; next < samples; ) {
      await sleepUntil(due(next));
      let end = next + 1;
      while (end < samples && due(end) <= performance.now()) end++;
      await execCommits(valkey, keys, transactions.slice(next, end));
      // The conductor's wait: WAITAOF re-issued in short slices, each of which asks the
      // replicas for a fresh acknowledgement (one long WAITAOF waits for their next
      // periodic one, up to a second).
      if (replicas > 0)
        await waitDurable(valkey, config.durabilityTimeoutMs, { replicasRequired: () => replicas });
      const now = performance.now();
      for (let i = next; i < end; i++) histogram.record((now - due(i)) * 1e6);
      batches++;
      next = end;
    }
    await deleteKeySpaces(valkey, [keys]);
    const wait = replicas > 0 ? ` + WAITAOF 1 ${replicas} in slices` : "";
    const name = `datastore (group commit${wait}, ${(samples / batches).toFixed(1)} a batch)`;
    return { name, latencyMs: histogram.percentilesMs(), samples: histogram.count };
  } finally {
    valkey.disconnect();
  }
}

/**
 * Sends `samples` at `rate` through `send(i, queue)`; each counts once the bench's lean
 * consumer (bound to `exchanges`, or none: its own queue) receives correlation id `i`.
 */
async function timedDeliveries(
  config: Config,
  name: string,
  exchanges: readonly string[],
  { rate, samples }: { rate: number; samples: number },
  send: (i: number, queue: string) => void,
): Promise<LatencyHistogram> {
  const arrived: (() => void)[] = [];
  const consumer = await LeanConsumer.open({
    url: config.brokerUrl,
    name,
    exchanges,
    onDelivery: (delivery) => arrived[Number(delivery.correlationId)]?.(),
  });
  try {
    return await paced(
      rate,
      samples,
      (i) =>
        new Promise<void>((resolve) => {
          arrived[i] = resolve;
          send(i, consumer.queue);
        }),
    );
  } finally {
    await consumer.close().catch(() => undefined);
  }
}

/** A reply's publish (no confirm awaited, as the conductor sends it) to its delivery. */
async function replyLeg(config: Config, rate: number, samples: number): Promise<FloorLeg> {
  const connection = await connectBroker(config.brokerUrl, "matchd-bench-floor-replier");
  try {
    const frames = new FramePublisher(await connection.createConfirmChannel());
    const body = Buffer.from(JSON.stringify({ commandId: "floor", status: "accepted", code: 0 }));
    const histogram = await timedDeliveries(
      config,
      "matchd-bench-floor-replies",
      [],
      { rate, samples },
      (i, queue) =>
        frames.publish("", queue, body, false, {
          correlationId: String(i),
          contentType: "application/json",
        }),
    );
    return { name: "reply", latencyMs: histogram.percentilesMs(), samples: histogram.count };
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** What the outbox does for an event, without matchd: read, publish, confirm, acknowledge. */
async function outboxLeg(config: Config, rate: number, samples: number): Promise<FloorLeg> {
  const keys = partitionKeys(991);
  const exchange = "matchd-bench-floor-events";
  const writer = createValkey(config.datastoreUrl, { name: "matchd-bench-floor-xadd" });
  const reader = createValkey(config.datastoreUrl, { name: "matchd-bench-floor-outbox" });
  const connection = await connectBroker(config.brokerUrl, "matchd-bench-floor-outbox");
  try {
    const channel = await connection.createConfirmChannel();
    const relay = relayStream(reader, keys.events, channel, exchange);
    const events = Array.from({ length: samples }, (_, i) => buildTransaction(1, i).event);
    const histogram = await timedDeliveries(
      config,
      "matchd-bench-floor-events",
      [exchange],
      { rate, samples },
      (i) => {
        writer.xadd(keys.events, "*", "event", events[i]!, "i", String(i)).catch(() => undefined);
      },
    );
    await relay.stop();
    await writer.del(keys.events);
    return { name: "outbox", latencyMs: histogram.percentilesMs(), samples: histogram.count };
  } finally {
    await connection.close().catch(() => undefined);
    writer.disconnect();
    reader.disconnect();
  }
}

/** Reads the stream as a consumer group and publishes each entry, until stopped. */
function relayStream(reader: Valkey, stream: string, channel: ConfirmChannel, exchange: string) {
  const frames = new FramePublisher(channel);
  let reading = true;
  const loop = (async () => {
    await reader.call("XGROUP", "CREATE", stream, "floor", "$", "MKSTREAM");
    while (reading) {
      const reply = (await reader.call(
        ...["XREADGROUP", "GROUP", "floor", "relay", "COUNT", "500", "BLOCK", "100"],
        ...["STREAMS", stream, ">"],
      )) as [string, [string, string[]][]][] | null;
      const entries = reply?.[0]?.[1] ?? [];
      if (entries.length === 0) continue;
      for (const [, fields] of entries) {
        frames.publish(exchange, exchange, Buffer.from(fields[1]!), false, {
          persistent: true,
          correlationId: fields[3],
          contentType: "application/json",
        });
      }
      await channel.waitForConfirms();
      const ids = entries.map(([id]) => id);
      await reader
        .multi()
        .xack(stream, "floor", ...ids)
        .xdel(stream, ...ids)
        .exec();
    }
  })();
  return {
    stop: async () => {
      reading = false;
      await loop;
    },
  };
}

/** The path's p50 and p99 over the floor's sums, at `digits` decimals. */
export function overFloor(path: Percentiles, floor: Floor, digits: number): string {
  const ratio = (value: number, floorValue: number) =>
    floorValue > 0 ? `${(value / floorValue).toFixed(digits)}x` : "n/a";
  return `p50 ${ratio(path.p50, floor.sum.p50)}, p99 ${ratio(path.p99, floor.sum.p99)}`;
}
