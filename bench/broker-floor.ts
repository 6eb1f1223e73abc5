// The "broker" boundary: what RabbitMQ alone costs per command on this machine. The same
// command bodies go through a queue declared like the contract's command queue (quorum,
// single active consumer, persistent messages, publisher confirms) to a consumer that does
// nothing but acknowledge, in batches, as the conductor does. No datastore, no matching:
// its throughput is the ceiling the conductor boundary can reach with this broker here.

import type { Channel, ConsumeMessage } from "amqplib";
import { connectBroker } from "../src/infra/amqp/connect";
import { FramePublisher } from "../src/infra/amqp/fast-publish";
import { commandQueueArguments } from "../src/infra/amqp/topology";
import { LatencyHistogram, type Percentiles } from "./histogram";
import { sleepUntil } from "./pace";
import { createWorkload } from "./workloads";

export interface BrokerFloorOptions {
  brokerUrl: string;
  commands: number;
  warmup: number;
  seed: number;
  /** Unacknowledged deliveries in flight, as the conductor's prefetch. */
  prefetch: number;
  /** Deliveries per acknowledgement at most, as the conductor's batch. */
  ackEvery: number;
  /** Offered commands per second (open loop); closed loop when undefined. */
  rate?: number;
  progress: (line: string) => void;
}

export interface BrokerFloorResult {
  seconds: number;
  commandsPerSecond: number;
  /** Publish (its scheduled time under a rate) to delivery at the consumer. */
  latencyMs: Percentiles;
  /** Under a rate: how late the bench itself sent each command after its scheduled time. */
  sendLagMs: Percentiles;
  received: number;
  outOfOrder: number;
  duplicates: number;
  queueEmptyAfter: boolean;
  bodyBytes: number;
  queueType: string;
}

export const brokerFloorQueue = "matchd-bench-broker-floor";

/** (Re)creates the bench's queue empty, declared as the contract's command queue. */
export async function declareBrokerFloorQueue(channel: Channel): Promise<void> {
  await channel.deleteQueue(brokerFloorQueue);
  await channel.assertQueue(brokerFloorQueue, { durable: true, arguments: commandQueueArguments });
}

/**
 * Consumes the bench's queue as the conductor does, counting what arrives: latency of the
 * timed commands from `sentAt`, order and copies; one multiple-ack per batch, a lone delivery
 * at once.
 */
async function consumeInOrder(channel: Channel, options: BrokerFloorOptions, sentAt: Float64Array) {
  const total = sentAt.length;
  const seen = new Uint8Array(total);
  let unacked: ConsumeMessage | null = null;
  let unackedCount = 0;
  let flushScheduled = false;
  const state = {
    latency: new LatencyHistogram(),
    received: 0,
    outOfOrder: 0,
    duplicates: 0,
    /** When the last command arrived (0 until then). */
    lastAt: 0,
    flushAck: () => {
      flushScheduled = false;
      if (unacked === null) return;
      channel.ack(unacked, true);
      unacked = null;
      unackedCount = 0;
    },
  };
  let expectedNext = 0;
  await channel.consume(brokerFloorQueue, (message) => {
    if (message === null) return;
    const i = Number(message.properties.messageId);
    if (seen[i] === 1) state.duplicates++;
    else {
      seen[i] = 1;
      state.received++;
      if (i !== expectedNext) state.outOfOrder++;
      expectedNext = i + 1;
      if (i >= options.warmup) state.latency.record((performance.now() - sentAt[i]!) * 1e6);
    }
    unacked = message;
    if (++unackedCount >= options.ackEvery) state.flushAck();
    else if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(state.flushAck);
    }
    if (state.received === total) state.lastAt = performance.now();
  });
  return state;
}

/**
 * The timed commands: back to back (closed loop), or each at its scheduled time, counted from
 * that time and not the actual send, so a late send is no coordinated omission.
 */
async function publishTimed(
  options: BrokerFloorOptions,
  timedStart: number,
  publish: (i: number, at?: number) => Promise<void>,
): Promise<void> {
  const total = options.warmup + options.commands;
  if (options.rate === undefined) {
    for (let i = options.warmup; i < total; i++) await publish(i);
    return;
  }
  const intervalMs = 1000 / options.rate;
  const due = (i: number) => timedStart + (i - options.warmup) * intervalMs;
  for (let i = options.warmup; i < total; ) {
    const wait = due(i) - performance.now();
    if (wait > 0) {
      await sleepUntil(due(i));
      continue;
    }
    while (i < total && due(i) <= performance.now()) {
      await publish(i, due(i));
      i++;
    }
  }
}

export async function runBrokerFloor(options: BrokerFloorOptions): Promise<BrokerFloorResult> {
  const workload = createWorkload("alternating", { seed: options.seed });
  const total = options.warmup + options.commands;
  const bodies: Buffer[] = [];
  for (let i = 0; i < total; i++) bodies.push(Buffer.from(JSON.stringify(workload.next(i))));

  // Two connections, as producer and conductor are two processes in the real pipeline.
  const producer = await connectBroker(options.brokerUrl, "matchd-bench-producer");
  const consumer = await connectBroker(options.brokerUrl, "matchd-bench-consumer");
  try {
    const setup = await producer.createChannel();
    await declareBrokerFloorQueue(setup);
    await setup.close();
    const publisher = await producer.createConfirmChannel();
    const frames = new FramePublisher(publisher);
    const channel = await consumer.createChannel();
    await channel.prefetch(options.prefetch);

    const sentAt = new Float64Array(total);
    const sendLag = new LatencyHistogram();
    const seen = await consumeInOrder(channel, options, sentAt);
    /** `at`: when the command counts as sent (its scheduled time in open loop). */
    const publish = async (i: number, at?: number) => {
      const now = performance.now();
      sentAt[i] = at ?? now;
      if (at !== undefined) sendLag.record(Math.max(0, now - at) * 1e6);
      const writable = frames.publish("", brokerFloorQueue, bodies[i]!, false, {
        persistent: true,
        contentType: "application/json",
        messageId: String(i),
        correlationId: String(i),
        timestamp: Date.now(),
      });
      if (!writable) await new Promise((resolve) => publisher.once("drain", resolve));
    };
    options.progress(`broker: ${options.warmup} warm-up, then ${options.commands} timed commands`);
    // A lost message must end the run with a failed invariant, not hang it.
    const deadline = performance.now() + Math.max(60_000, total * 2);
    const waitUntil = async (reached: () => boolean) => {
      while (!reached() && performance.now() < deadline) await Bun.sleep(5);
    };
    for (let i = 0; i < options.warmup; i++) await publish(i);
    await waitUntil(() => seen.received >= options.warmup);
    const timedStart = performance.now();
    await publishTimed(options, timedStart, publish);
    await publisher.waitForConfirms();
    // The timed window covers the publisher's confirms as well as the last delivery.
    const confirmedAt = performance.now();
    await waitUntil(() => seen.received === total);
    const timedEnd = Math.max(seen.lastAt === 0 ? performance.now() : seen.lastAt, confirmedAt);
    seen.flushAck();
    // Closing the consumer returns anything unacknowledged to the queue, so an ack that
    // never arrived shows up as a message left behind.
    await channel.close();
    const check = await producer.createChannel();
    const left = await check.checkQueue(brokerFloorQueue);
    await check.deleteQueue(brokerFloorQueue);
    await check.close();
    const seconds = (timedEnd - timedStart) / 1000;
    return {
      seconds,
      commandsPerSecond: options.commands / seconds,
      latencyMs: seen.latency.percentilesMs(),
      sendLagMs: sendLag.percentilesMs(),
      received: seen.received,
      outOfOrder: seen.outOfOrder,
      duplicates: seen.duplicates,
      queueEmptyAfter: left.messageCount === 0,
      bodyBytes: Math.round(bodies.reduce((sum, body) => sum + body.length, 0) / total),
      queueType: String(commandQueueArguments["x-queue-type"]),
    };
  } finally {
    await consumer.close().catch(() => undefined);
    await producer.close().catch(() => undefined);
  }
}
