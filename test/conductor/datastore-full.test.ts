/**
 * The datastore reaches maxmemory (noeviction) under load, on a private primary + replica
 * pair so the shared stack is untouched: the conductor's commits are refused, so nothing is
 * acknowledged or replied and the conductor keeps running; once memory is available again,
 * every command completes, each applied once.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import Redis from "ioredis";
import { type TestStack, testStack, uniquePartition } from "../support/stack";
import { startValkeyPair, type ValkeyPair } from "../support/valkey-pair";
import {
  alternatingRpcCommands,
  disposeAll,
  eventually,
  expectAlternatingCompletedOnce,
  openReplies,
  PartitionStore,
  Publisher,
  startConductor,
} from "./helpers";

let stack: TestStack;
let publisher: Publisher;
let rpc: ChannelModel;
let pair: ValkeyPair;
let admin: Redis;

beforeAll(async () => {
  stack = await testStack();
  publisher = await Publisher.open(stack.brokerUrl);
  rpc = await amqp.connect(stack.brokerUrl);
  pair = await startValkeyPair("matchd-datastore-full-");
  admin = new Redis(pair.primary.url);
}, 60_000);
afterEach(disposeAll);
afterAll(async () => {
  admin?.disconnect();
  await publisher?.close();
  await rpc?.close().catch(() => undefined);
  await pair?.replica.stop().catch(() => undefined);
  await pair?.primary.stop().catch(() => undefined);
}, 60_000);

test("datastore full: nothing acknowledged, the conductor keeps running; memory back: everything completes once", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(pair.primary.url, partition);
  const { queue: replyQueue, replies, close: closeReplies } = await openReplies(rpc);
  try {
    const { commands, publish } = alternatingRpcCommands(publisher, partition, 53, 60, replyQueue);

    const conductor = await startConductor(stack, partition, { datastoreUrl: pair.primary.url });
    await publish(0, 10);
    await eventually("first 10 replied", () => replies.size === 10);

    await admin.config("SET", "maxmemory", "1");
    try {
      await expect(admin.set(`matchd-oom-probe-${partition}`, "1")).rejects.toThrow("OOM");
      await publish(10, 60);
      await eventually(
        "commits refused while the datastore is full",
        async () => (await conductor.metric("matching_command_failures_total")) >= 2,
        15_000,
      );
      const full = await conductor.metrics();
      expect(full.matching_commands_processed_total).toBe(10);
      expect(replies.size).toBe(10);
      expect(conductor.process.exitCode).toBeNull();
    } finally {
      await admin.config("SET", "maxmemory", "0");
    }

    await expectAlternatingCompletedOnce(conductor, store, publisher, partition, commands, replies);
  } finally {
    await closeReplies();
    store.close();
    await publisher.deleteQueue(partition);
  }
}, 90_000);

test("datastore full: a redelivered command's markers are renewed on every retry, so it cannot run twice", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(pair.primary.url, partition);
  const { queue: replyQueue, replies, close: closeReplies } = await openReplies(rpc);
  try {
    const { commands, publish } = alternatingRpcCommands(publisher, partition, 54, 2, replyQueue);
    const conductor = await startConductor(stack, partition, {
      datastoreUrl: pair.primary.url,
      extraArgs: ["--dedup-retention-s", "60"],
    });
    await publish(0, 2);
    await eventually("both replied", () => replies.size === 2);
    const marker = store.keys.processedCommand(commands[0]!.commandId);
    const eventsBefore = await store.eventCount();
    // Aged past what a renewal leaves: a TTL back near 60 s can only be a renewal.
    await eventually("the marker aged", async () => (await admin.ttl(marker)) <= 56, 10_000);

    await admin.config("SET", "maxmemory", "1");
    try {
      // A copy of the first command (a producer's retry): its batch is refused while full.
      await publisher.publish(partition, [commands[0]!]);
      await eventually(
        "the copy's batch refused at least twice, its marker renewed",
        async () =>
          (await conductor.metric("matching_command_failures_total")) >= 2 &&
          (await admin.ttl(marker)) >= 58,
        15_000,
        async () => `ttl ${await admin.ttl(marker)}`,
      );
      expect(await conductor.metric("matching_commands_duplicate_total")).toBe(0);
    } finally {
      await admin.config("SET", "maxmemory", "0");
    }
    await eventually(
      "the copy acknowledged as a duplicate",
      async () => (await conductor.metric("matching_commands_duplicate_total")) === 1,
      15_000,
    );
    // Applied once: the copy added no event.
    expect(await store.eventCount()).toBe(eventsBefore);
    expect(await conductor.stop()).toBe(0);
  } finally {
    await closeReplies();
    store.close();
    await publisher.deleteQueue(partition);
  }
}, 60_000);
