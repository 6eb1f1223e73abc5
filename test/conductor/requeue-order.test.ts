/**
 * A failed batch goes back to the queue with every later delivery, and the conductor gets
 * them again in their original order, including deliveries that were already on the wire
 * when the batch failed (a nack reaches only what has arrived).
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
      MATCHING_PREFETCH: "100",
      MATCHING_LOG_LEVEL: "error",
    },
    new Map(),
    "conductor",
  );
  if (!resolved.ok) throw new Error(resolved.problems.join("; "));
  return resolved.config;
}

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
  consumer = new CommandConsumer(consumerConfig(partition), createLogger("error"), () => {});
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
