/**
 * A conductor whose batch failed hands the queue to its standby when it requeues, and then
 * waits in line: once it has had no deliveries for a while after its reload, /readyz must stop
 * reporting the old failure, or a healthy standby reads as broken for ever.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import { failureClearsWhenIdleMs } from "../../src/conductor/service";
import type { RunningValkey } from "../../src/stack/index";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { startValkeyPair } from "../support/valkey-pair";
import {
  alternatingRpcCommands,
  disposeAll,
  eventually,
  expectEventsOnce,
  openReplies,
  PartitionStore,
  Publisher,
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

const readyStatus = async (url: string): Promise<number> => (await fetch(`${url}/readyz`)).status;

test("both conductors failed a batch; the one left standing by is ready again once idle", async () => {
  const pair = await startValkeyPair("matchd-standby-readiness-");
  servers.push(pair.primary, pair.replica);
  const partition = uniquePartition();
  const store = new PartitionStore(pair.primary.url, partition);
  const { queue: replyQueue, replies, close: closeReplies } = await openReplies(rpc);
  try {
    const { commands, publish } = alternatingRpcCommands(publisher, partition, 71, 40, replyQueue);
    const options = {
      datastoreUrl: pair.primary.url,
      extraArgs: ["--durability-timeout-ms", "300"],
    };
    const first = await startConductor(stack, partition, options);
    const second = await startConductor(stack, partition, options);
    await publish(0, 10);
    await eventually("first 10 replied", () => replies.size === 10);

    // With the replica down every batch times out; each requeue hands the queue to the other
    // conductor, so both fail.
    await pair.replica.stop();
    await publish(10, 40);
    await eventually(
      "both conductors failed a batch",
      async () =>
        (await first.metric("matching_durability_timeouts_total")) >= 1 &&
        (await second.metric("matching_durability_timeouts_total")) >= 1,
      30_000,
    );
    expect(await readyStatus(first.url)).toBe(503);

    servers.push(await pair.restartReplica(pair.replica.port));
    await eventually("every command replied", () => replies.size === commands.length, 30_000);
    for (const command of commands) {
      expect(replies.get(command.commandId)).toMatchObject({ status: "accepted" });
    }
    expect(await store.eventCount()).toBe(2 * commands.length);
    await expectEventsOnce(store, commands);

    // The active one is ready after its successful batch; the standby after its idle time.
    await eventually(
      "both ready",
      async () => (await readyStatus(first.url)) === 200 && (await readyStatus(second.url)) === 200,
      failureClearsWhenIdleMs + 15_000,
    );
    const body = (await (await fetch(`${first.url}/readyz`)).json()) as { reasons: string[] };
    expect(body.reasons).toEqual([]);
    expect(first.process.exitCode).toBeNull();
    expect(second.process.exitCode).toBeNull();
  } finally {
    await closeReplies();
    store.close();
    await publisher.deleteQueue(partition);
  }
}, 90_000);
