/**
 * A failed batch closes the conductor's broker links to requeue what it holds: the replies of
 * the batch acknowledged just before it, still queued behind a full socket, must reach their
 * clients first (a connection's close frame overtaking them would lose them for good).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import amqp from "amqplib";
import { CommandConsumer } from "../../src/conductor/consumer";
import { resolveConfig } from "../../src/config/resolve";
import type { Config } from "../../src/config/schema";
import { commandExchange, commandQueue } from "../../src/infra/amqp/topology";
import { createLogger } from "../../src/infra/log";
import { eventually } from "../support/eventually";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";

let stack: TestStack;
let consumer: CommandConsumer | undefined;

beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);

afterAll(async () => {
  await consumer?.close();
});

function consumerConfig(partition: number): Config {
  const resolved = resolveConfig(
    {
      MATCHING_PARTITION: String(partition),
      MATCHING_PARTITION_COUNT: "1024",
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      MATCHING_BROKER_URL: stack.brokerUrl,
      MATCHING_PREFETCH: "200",
      MATCHING_LOG_LEVEL: "error",
    },
    new Map(),
    "conductor",
  );
  if (!resolved.ok) throw new Error(resolved.problems.join("; "));
  return resolved.config;
}

test("replies of an acknowledged batch still arrive when the next batch fails", async () => {
  const partition = uniquePartition();
  const commands = 101;
  consumer = new CommandConsumer(consumerConfig(partition), createLogger("error"), () => {});
  await consumer.startWithRetry();
  const client = await amqp.connect(stack.brokerUrl);
  const channel = await client.createConfirmChannel();
  // A quorum queue, as clients that must not lose a reply declare theirs.
  const replyQueue = `matchd-test-replies-${partition}`;
  await channel.assertQueue(replyQueue, { durable: true, arguments: { "x-queue-type": "quorum" } });
  const replies = new Set<string>();
  await channel.consume(
    replyQueue,
    (message) => {
      if (message !== null) replies.add(String(message.properties.correlationId));
    },
    { noAck: true },
  );
  for (let i = 0; i < commands; i++)
    channel.publish(commandExchange, commandQueue(partition), Buffer.from(String(i)), {
      persistent: true,
      replyTo: replyQueue,
      correlationId: String(i),
    });
  await channel.waitForConfirms();
  await eventually("every delivery", () => consumer!.pendingCount === commands);

  const acknowledged = consumer.take(commands - 1);
  expect(consumer.ack(acknowledged)).toBe(true);
  // 100 replies of 256 KiB: far more than a socket takes at once, so most wait in the
  // client library's buffers when the link closes.
  const body = "x".repeat(256 * 1024);
  for (const delivery of acknowledged) consumer.reply(delivery.message, body);
  consumer.requeueFrom(consumer.take(1));

  await eventually(
    "every acknowledged command's reply",
    () => replies.size === commands - 1,
    30_000,
  );
  expect([...replies].sort((a, b) => Number(a) - Number(b))).toEqual(
    Array.from({ length: commands - 1 }, (_, i) => String(i)),
  );
  await consumer.close();
  consumer = undefined;
  await channel.deleteQueue(commandQueue(partition));
  await channel.deleteQueue(replyQueue);
  await client.close();
}, 60_000);
