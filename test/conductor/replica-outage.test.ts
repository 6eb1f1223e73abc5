/**
 * The replica stops under load (on a private primary + replica pair, so the shared stack
 * is untouched): nothing is acknowledged or replied while WAITAOF cannot be satisfied;
 * once a replica is back on the same port and directory, every command completes, each
 * applied once. A durability wait that ioredis resends on a fresh connection after a cut
 * (where WAITAOF answers at once) never acknowledges a batch. `appendfsync` changed away
 * from `always` under a running conductor acknowledges nothing until it is back.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import Redis from "ioredis";
import { createWorkload } from "../../bench/workloads";
import type { RunningValkey } from "../../src/stack/index";
import { startTcpProxy } from "../outbox/helpers";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { startValkeyPair } from "../support/valkey-pair";
import {
  alternatingRpcCommands,
  disposeAll,
  eventually,
  expectAlternatingCompletedOnce,
  expectEventsOnce,
  openReplies,
  PartitionStore,
  Publisher,
  partitionCount,
  startConductor,
} from "./helpers";

let stack: TestStack;
let publisher: Publisher;
let rpc: ChannelModel;
const servers: RunningValkey[] = [];

beforeAll(async () => {
  stack = await testStack();
  publisher = await Publisher.open(stack.brokerUrl);
  rpc = await amqp.connect(stack.brokerUrl);
}, stackStartTimeoutMs);
afterEach(disposeAll);
afterAll(async () => {
  await publisher.close();
  await rpc.close().catch(() => undefined);
  for (const server of servers) await server.stop().catch(() => undefined);
});

test("replica down: nothing acknowledged; replica back: everything completes once", async () => {
  const pair = await startValkeyPair("matchd-replica-outage-");
  const primary = pair.primary;
  let replica = pair.replica;
  servers.push(primary, replica);

  const partition = uniquePartition();
  const store = new PartitionStore(primary.url, partition);
  const { queue: replyQueue, replies, close: closeReplies } = await openReplies(rpc);
  try {
    const { commands, publish } = alternatingRpcCommands(publisher, partition, 51, 60, replyQueue);

    const conductor = await startConductor(stack, partition, {
      datastoreUrl: primary.url,
      extraArgs: ["--durability-timeout-ms", "300"],
    });
    await publish(0, 10);
    await eventually("first 10 replied", () => replies.size === 10);

    await replica.stop();
    await publish(10, 60);
    await eventually(
      "durability timeouts while the replica is down",
      async () => (await conductor.metric("matching_durability_timeouts_total")) >= 2,
      15_000,
    );
    const down = await conductor.metrics();
    expect(down.matching_commands_processed_total).toBe(10);
    expect(Number(down.matching_command_failures_total)).toBeGreaterThan(0);
    expect(replies.size).toBe(10);
    expect((await fetch(`${conductor.url}/readyz`)).status).toBe(503);
    expect(conductor.process.exitCode).toBeNull();
    // Committed, so its result is stored, but not durable: the query must not report it,
    // for the commit could still be lost with the primary.
    const committed = commands[10]!.commandId;
    expect((await store.storedResults([committed])).has(committed)).toBe(true);
    const notYet = await fetch(`${conductor.url}/commands/${committed}`);
    expect(notYet.status).toBe(503);
    expect(await notYet.text()).toContain("not confirmed durable");

    replica = await pair.restartReplica(replica.port);
    servers.push(replica);
    let durable: unknown;
    await eventually("the stored result reported once durable", async () => {
      const response = await fetch(`${conductor.url}/commands/${committed}`);
      if (response.status === 200) durable = await response.json();
      return response.status === 200;
    });
    expect((durable as { commandId: string }).commandId).toBe(committed);
    const after = await expectAlternatingCompletedOnce(
      conductor,
      store,
      publisher,
      partition,
      commands,
      replies,
    );
    console.log(
      `replica outage: failures ${after.matching_command_failures_total}, durability timeouts ${after.matching_durability_timeouts_total}, reloads ${after.matching_book_reloads_total}`,
    );
  } finally {
    await closeReplies();
    store.close();
    await publisher.deleteQueue(partition);
  }
}, 90_000);

test("a durability wait resent on a new datastore connection never acknowledges a batch", async () => {
  const { primary, replica } = await startValkeyPair("matchd-resent-wait-");
  servers.push(primary, replica);
  // The conductor reaches the primary through a proxy, so its connections can be cut.
  const proxy = await startTcpProxy(primary.url);
  const partition = uniquePartition();
  const store = new PartitionStore(primary.url, partition);
  const channel = await rpc.createChannel();
  let paused = false;
  try {
    const { queue: replyQueue } = await channel.assertQueue("", {
      exclusive: true,
      autoDelete: true,
    });
    const replies = new Set<string>();
    await channel.consume(
      replyQueue,
      (message) => message && replies.add(String(message.properties.correlationId)),
      { noAck: true },
    );
    const workload = createWorkload("alternating", { seed: 52, partition, partitionCount });
    const commands = Array.from({ length: 3 }, (_, i) => workload.next(i));
    const publish = (command: (typeof commands)[number]) =>
      publisher.publish(partition, [command], {
        replyTo: replyQueue,
        correlationId: command.commandId,
      });
    const conductor = await startConductor(stack, partition, {
      datastoreUrl: proxy.url,
      extraArgs: ["--durability-timeout-ms", "3000"],
    });
    await publish(commands[0]!);
    await eventually("the first command replied", () => replies.size === 1);

    // The replica stops acknowledging: the next commit cannot become durable.
    process.kill(replica.pid, "SIGSTOP");
    paused = true;
    await publish(commands[1]!);
    // Committed (its result is stored before the durability wait), so it now waits.
    await eventually("the second command committed", async () =>
      (await store.storedResults([commands[1]!.commandId])).has(commands[1]!.commandId),
    );
    await Bun.sleep(100);
    // Cut the conductor's connections while it waits: ioredis resends the WAITAOF on a fresh
    // connection, where it answers at once because that connection has written nothing.
    proxy.outage(100);
    await Bun.sleep(2000);
    expect(replies.has(commands[1]!.commandId)).toBe(false);

    process.kill(replica.pid, "SIGCONT");
    paused = false;
    await eventually("replied once the replica fsyncs again", () => replies.size === 2, 30_000);
    await publish(commands[2]!);
    await eventually("the next command replied", () => replies.size === 3, 15_000);
    await expectEventsOnce(store, commands);
    expect(await conductor.stop()).toBe(0);
  } finally {
    if (paused) process.kill(replica.pid, "SIGCONT");
    await proxy.close();
    await channel.close().catch(() => undefined);
    store.close();
    await publisher.deleteQueue(partition);
  }
}, 90_000);

test("appendfsync changed to everysec under a running conductor: nothing acknowledged until it is always again", async () => {
  const pair = await startValkeyPair("matchd-fsync-watch-");
  servers.push(pair.primary, pair.replica);
  const admin = new Redis(pair.primary.url);
  const partition = uniquePartition();
  const store = new PartitionStore(pair.primary.url, partition);
  const { replies, queue: replyQueue, close: closeReplies } = await openReplies(rpc);
  try {
    const { commands, publish } = alternatingRpcCommands(publisher, partition, 61, 30, replyQueue);
    const conductor = await startConductor(stack, partition, { datastoreUrl: pair.primary.url });
    await publish(0, 10);
    await eventually("first 10 replied", () => replies.size === 10);

    await admin.call("CONFIG", "SET", "appendfsync", "everysec");
    await eventually("readiness names the setting", async () => {
      const response = await fetch(`${conductor.url}/readyz`);
      return response.status === 503 && (await response.text()).includes("appendfsync is everysec");
    });
    await publish(10, 30);
    // The batches were taken and their waits failed (each failed command is counted), so
    // nothing below can pass merely because the conductor had not got to them yet.
    await eventually(
      "failed batches of the new commands",
      async () => (await conductor.metric("matching_command_failures_total")) >= 20,
      15_000,
    );
    expect(replies.size).toBe(10);
    expect((await conductor.metrics()).matching_commands_processed_total).toBe(10);

    expect(conductor.log()).toContain("appendfsync changed on the primary");
    await admin.call("CONFIG", "SET", "appendfsync", "always");
    await expectAlternatingCompletedOnce(conductor, store, publisher, partition, commands, replies);
  } finally {
    await admin.call("CONFIG", "SET", "appendfsync", "always").catch(() => undefined);
    admin.disconnect();
    await closeReplies();
    store.close();
    await publisher.deleteQueue(partition);
  }
}, 90_000);
