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
    const seen = new Uint8Array(total);
    const latency = new LatencyHistogram();
    const sendLag = new LatencyHistogram();
    let received = 0;
    let outOfOrder = 0;
    let duplicates = 0;
    let expectedNext = 0;
    let unacked: ConsumeMessage | null = null;
    let unackedCount = 0;
    let flushScheduled = false;
    let timedStart = 0;
    let timedEnd = 0;
    const flushAck = () => {
      flushScheduled = false;
      if (unacked === null) return;
      channel.ack(unacked, true);
      unacked = null;
      unackedCount = 0;
    };
    await channel.consume(brokerFloorQueue, (message) => {
      if (message === null) return;
      const i = Number(message.properties.messageId);
      if (seen[i] === 1) duplicates++;
      else {
        seen[i] = 1;
        received++;
        if (i !== expectedNext) outOfOrder++;
        expectedNext = i + 1;
        if (i >= options.warmup) latency.record((performance.now() - sentAt[i]!) * 1e6);
      }
      unacked = message;
      // Acknowledge like the conductor: one multiple-ack per batch, a lone delivery at once.
      if (++unackedCount >= options.ackEvery) flushAck();
      else if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flushAck);
      }
      if (received === total) timedEnd = performance.now();
    });

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
    await waitUntil(() => received >= options.warmup);
    timedStart = performance.now();
    if (options.rate === undefined) {
      for (let i = options.warmup; i < total; i++) await publish(i);
    } else {
      // Latency counts from each scheduled time, not the actual send: no coordinated omission.
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
    await publisher.waitForConfirms();
    // The timed window covers the publisher's confirms as well as the last delivery.
    const confirmedAt = performance.now();
    await waitUntil(() => received === total);
    timedEnd = Math.max(timedEnd === 0 ? performance.now() : timedEnd, confirmedAt);
    flushAck();
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
      latencyMs: latency.percentilesMs(),
      sendLagMs: sendLag.percentilesMs(),
      received,
      outOfOrder,
      duplicates,
      queueEmptyAfter: left.messageCount === 0,
      bodyBytes: Math.round(bodies.reduce((sum, body) => sum + body.length, 0) / total),
      queueType: String(commandQueueArguments["x-queue-type"]),
    };
  } finally {
    await consumer.close().catch(() => undefined);
    await producer.close().catch(() => undefined);
  }
}
