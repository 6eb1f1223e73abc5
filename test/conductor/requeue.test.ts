/**
 * A failed batch goes back to the queue with every later delivery, and the conductor gets
 * them again in their original order, including deliveries that were already on the wire
 * when the batch failed (a nack reaches only what has arrived). The requeue closes the
 * conductor's broker links: the replies of the batch acknowledged just before, still queued
 * behind a full socket, must reach their clients first (a connection's close frame
 * overtaking them would lose them for good).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import amqp from "amqplib";
import { CommandConsumer } from "../../src/conductor/consumer";
import { commandExchange, commandQueue } from "../../src/infra/amqp/topology";
import { createLogger } from "../../src/infra/log";
import { eventually } from "../support/eventually";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { conductorConfig } from "./helpers";

let stack: TestStack;
let consumer: CommandConsumer | undefined;

beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);

afterAll(async () => {
  await consumer?.close();
});

/** Publishes bodies `from`..`to` - 1 from another process, with confirms, then waits a moment. */
function publishFromAnotherProcess(partition: number, from: number, to: number): void {
  const script = `
    import amqp from "amqplib";
    const connection = await amqp.connect(process.env.URL);
    const channel = await connection.createConfirmChannel();
    for (let i = ${from}; i < ${to}; i++)
      channel.publish(${JSON.stringify(commandExchange)}, ${JSON.stringify(commandQueue(partition))}, Buffer.from(String(i)), { persistent: true });
    await channel.waitForConfirms();
    // Until the broker has handed them all to the consumer, whose process is blocked
    // meanwhile: then they are on the wire (in its socket), not in the queue.
    const check = await connection.createChannel();
    for (let n = 0; n < 250; n++) {
      if ((await check.checkQueue(${JSON.stringify(commandQueue(partition))})).messageCount === 0) break;
      await Bun.sleep(20);
    }
    await connection.close();
  `;
  const result = Bun.spawnSync([process.execPath, "-e", script], {
    cwd: process.cwd(),
    env: { ...process.env, URL: stack.brokerUrl },
  });
  if (result.exitCode !== 0) throw new Error(result.stderr.toString());
}

test("a requeued batch and the deliveries on the wire behind it come back in their original order", async () => {
  const partition = uniquePartition();
  consumer = new CommandConsumer(
    conductorConfig(stack, partition, 100),
    createLogger("error"),
    () => {},
  );
  await consumer.startWithRetry();
  const publisher = await amqp.connect(stack.brokerUrl);
  const channel = await publisher.createConfirmChannel();
  for (let i = 0; i < 10; i++)
    channel.publish(commandExchange, commandQueue(partition), Buffer.from(String(i)), {
      persistent: true,
    });
  await channel.waitForConfirms();
  await publisher.close();
  await eventually("the first ten deliveries", () => consumer!.pendingCount === 10);
  const batch = consumer.take(5);

  // Ten more reach the consumer's socket while this process cannot read it; the batch then
  // fails before they are read, as a commit that fails while deliveries stream in.
  publishFromAnotherProcess(partition, 10, 20);
  consumer.requeueFrom(batch);

  const seen: string[] = [];
  await eventually(
    "all twenty again",
    () => {
      for (const delivery of consumer!.take(100)) seen.push(delivery.message.content.toString());
      return seen.length >= 20;
    },
    20_000,
  );
  expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
  await consumer.close();
  consumer = undefined;
  const cleanup = await amqp.connect(stack.brokerUrl);
  await (await cleanup.createChannel()).deleteQueue(commandQueue(partition));
  await cleanup.close();
}, 60_000);

test("replies of an acknowledged batch still arrive when the next batch fails", async () => {
  const partition = uniquePartition();
  const commands = 101;
  consumer = new CommandConsumer(
    conductorConfig(stack, partition, 200),
    createLogger("error"),
    () => {},
  );
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
    () => `(${replies.size} of ${commands - 1} arrived)`,
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
