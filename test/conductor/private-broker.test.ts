/**
 * The conductor against broker trouble the shared broker of the other tests must not see (on
 * a private RabbitMQ node). A resource alarm: the broker stops reading from connections that
 * publish, and replies are publishes; the commands already queued must still be matched and
 * acknowledged, the queue drained, and the replies must follow once the alarm clears. A
 * dead-letter queue deleted under a running conductor: the next dead letter still lands.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import { commandDeadLetterQueue, declareCommandTopology } from "../../src/infra/amqp/topology";
import { createLogger } from "../../src/infra/log";
import { stopProcesses } from "../../src/stack/process";
import { RABBITMQ_CTL, type RunningRabbitmq, startRabbitmq } from "../../src/stack/rabbitmq";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { tempDir } from "../support/temp-dir";
import {
  alternatingRpcCommands,
  disposeAll,
  eventually,
  openReplies,
  PartitionStore,
  Publisher,
  startConductor,
} from "./helpers";

let stack: TestStack;
let broker: RunningRabbitmq;
let brokerDir: string;
let alarmed = false;

beforeAll(async () => {
  stack = await testStack();
  brokerDir = tempDir("matchd-broker-alarm-");
  broker = await startRabbitmq({ dir: brokerDir });
}, stackStartTimeoutMs);
afterEach(disposeAll);
afterAll(async () => {
  if (broker) await stopProcesses([...broker.processes].reverse(), 15_000, brokerDir);
}, 60_000);

/** Sets the node's memory high watermark: a tiny one raises the memory alarm at once. */
async function watermark(fraction: string): Promise<void> {
  const child = Bun.spawn([RABBITMQ_CTL, "set_vm_memory_high_watermark", fraction], {
    env: { ...process.env, ...broker.ctlEnv },
    stdout: "ignore",
    stderr: "pipe",
  });
  if ((await child.exited) !== 0)
    throw new Error(`rabbitmqctl: ${await new Response(child.stderr).text()}`);
  alarmed = fraction === "0.0001";
}

test("a memory alarm holds back the replies, not the acknowledgements: the queue drains", async () => {
  const partition = uniquePartition();
  const brokerStack = { ...stack, brokerUrl: broker.url };
  const publisher = await Publisher.open(broker.url);
  const rpc: ChannelModel = await amqp.connect(broker.url);
  const store = new PartitionStore(stack.datastoreUrl, partition);
  const { queue: replyQueue, replies, close: closeReplies } = await openReplies(rpc);
  try {
    const count = 200;
    const { commands, publish } = alternatingRpcCommands(
      publisher,
      partition,
      91,
      count,
      replyQueue,
    );
    // Queued before the alarm (which blocks the producers too) and before any conductor.
    await declareCommandTopology(rpc, partition, createLogger("error"));
    await publish(0, count);
    await eventually(
      "every command queued",
      async () => (await publisher.messageCount(partition)) === count,
    );
    await watermark("0.0001");
    // A small prefetch: with its acknowledgements held back the conductor would stall at once.
    const conductor = await startConductor(brokerStack, partition, {
      extraArgs: ["--prefetch", "20", "--batch-max", "10"],
    });
    await eventually(
      "every command matched and acknowledged",
      async () => (await conductor.metric("matching_commands_processed_total")) === count,
      30_000,
    );
    await eventually(
      "the queue drained",
      async () => (await publisher.messageCount(partition)) === 0,
    );
    expect(await store.eventCount()).toBe(2 * count);
    await watermark("0.4");
    await eventually("every reply delivered", () => replies.size === count, 30_000);
    for (const command of commands) {
      expect(replies.get(command.commandId)).toMatchObject({ status: "accepted" });
    }
  } finally {
    if (alarmed) await watermark("0.4");
    await closeReplies();
    store.close();
    await publisher.deleteQueue(partition).catch(() => undefined);
    await publisher.close();
    await rpc.close().catch(() => undefined);
  }
}, 90_000);

test("a dead-letter queue deleted under a running conductor is declared again before a dead letter goes out", async () => {
  const partition = uniquePartition();
  const publisher = await Publisher.open(broker.url);
  const admin: ChannelModel = await amqp.connect(broker.url);
  try {
    const conductor = await startConductor({ ...stack, brokerUrl: broker.url }, partition);
    const channel = await admin.createChannel();
    await channel.deleteQueue(commandDeadLetterQueue);
    const messageId = `unreadable-${partition}`;
    await publisher.publish(partition, ["{ not json"], { messageId });
    await eventually(
      "the unreadable message processed",
      async () => (await conductor.metric("matching_commands_processed_total")) === 1,
    );
    const message = await channel.get(commandDeadLetterQueue, { noAck: true });
    expect(message === false ? undefined : message.properties.messageId).toBe(messageId);
    expect(await publisher.messageCount(partition)).toBe(0);
  } finally {
    await publisher.deleteQueue(partition).catch(() => undefined);
    await publisher.close();
    await admin.close().catch(() => undefined);
  }
}, 60_000);

test("a dead letter under an alarm fails its batch within its bound instead of hanging; after the alarm it lands", async () => {
  const partition = uniquePartition();
  const publisher = await Publisher.open(broker.url);
  const rpc: ChannelModel = await amqp.connect(broker.url);
  const store = new PartitionStore(stack.datastoreUrl, partition);
  const { queue: replyQueue, replies, close: closeReplies } = await openReplies(rpc);
  try {
    const { publish } = alternatingRpcCommands(publisher, partition, 93, 20, replyQueue);
    await declareCommandTopology(rpc, partition, createLogger("error"));
    const messageId = `unreadable-under-alarm-${partition}`;
    await publish(0, 10);
    await publisher.publish(partition, ["{ not json"], { messageId });
    await publish(10, 20);
    await watermark("0.0001");
    // Batches of 5: the replies of the first ones block the output connection before the
    // batch with the unreadable message asks for its dead letter's confirm.
    const conductor = await startConductor({ ...stack, brokerUrl: broker.url }, partition, {
      extraArgs: ["--prefetch", "25", "--batch-max", "5"],
    });
    // Not ready as well: a redelivery read in parts may let a batch ahead of the unreadable
    // message succeed in between, which reads ready until the dead letter fails again.
    await eventually(
      "the batch failed on its unconfirmed dead letter, and not ready",
      async () =>
        (await conductor.metric("matching_command_failures_total")) >= 1 &&
        (await fetch(`${conductor.url}/readyz`)).status === 503,
      30_000,
    );
    await watermark("0.4");
    await eventually(
      "every command processed",
      async () => (await conductor.metric("matching_commands_processed_total")) === 21,
      30_000,
    );
    // The unreadable message asked for no reply.
    await eventually("every reply delivered", () => replies.size === 20, 30_000);
    const channel = await rpc.createChannel();
    const found: string[] = [];
    for (;;) {
      const message = await channel.get(commandDeadLetterQueue, { noAck: true });
      if (message === false) break;
      found.push(String(message.properties.messageId));
    }
    expect(found).toContain(messageId);
    expect(await store.eventCount()).toBe(40);
  } finally {
    if (alarmed) await watermark("0.4");
    await closeReplies();
    store.close();
    await publisher.deleteQueue(partition).catch(() => undefined);
    await publisher.close();
    await rpc.close().catch(() => undefined);
  }
}, 120_000);
