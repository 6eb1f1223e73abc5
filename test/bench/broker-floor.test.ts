// Runs the broker-alone bench small against the test stack's RabbitMQ: every command
// arrives once, in order, and the queue it declared is gone afterwards.

import { expect, test } from "bun:test";
import amqp from "amqplib";
import {
  brokerFloorQueue,
  declareBrokerFloorQueue,
  runBrokerFloor,
} from "../../bench/broker-floor";
import { commandQueueArguments } from "../../src/infra/amqp/topology";
import { testStack } from "../support/stack";

test("broker bench delivers every command once, in order, and removes its queue", async () => {
  const { brokerUrl } = await testStack();
  const result = await runBrokerFloor({
    brokerUrl,
    commands: 1000,
    warmup: 100,
    seed: 7,
    prefetch: 200,
    ackEvery: 50,
    progress: () => undefined,
  });
  expect(result.received).toBe(1100);
  expect(result.duplicates).toBe(0);
  expect(result.outOfOrder).toBe(0);
  expect(result.queueEmptyAfter).toBe(true);
  expect(result.commandsPerSecond).toBeGreaterThan(0);
  expect(result.latencyMs.max).toBeGreaterThanOrEqual(result.latencyMs.p50);

  const connection = await amqp.connect(brokerUrl);
  const channel = await connection.createChannel();
  channel.on("error", () => undefined);
  await expect(channel.checkQueue(brokerFloorQueue)).rejects.toThrow(/NOT_FOUND/);
  await connection.close().catch(() => undefined);
}, 30_000);

test("the broker bench declares a quorum queue, as the contract's command queue", async () => {
  // RabbitMQ does not report a queue's type over AMQP, but it refuses to redeclare a queue
  // with another type: redeclaring the bench's queue as classic must fail.
  const { brokerUrl } = await testStack();
  const connection = await amqp.connect(brokerUrl);
  try {
    const setup = await connection.createChannel();
    await declareBrokerFloorQueue(setup);
    const classic = await connection.createChannel();
    classic.on("error", () => undefined);
    await expect(
      classic.assertQueue(brokerFloorQueue, {
        durable: true,
        arguments: { ...commandQueueArguments, "x-queue-type": "classic" },
      }),
    ).rejects.toThrow(/PRECONDITION_FAILED.*x-queue-type/);
    await setup.deleteQueue(brokerFloorQueue);
  } finally {
    await connection.close().catch(() => undefined);
  }
}, 30_000);
