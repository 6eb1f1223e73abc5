/**
 * Two conductors on one partition: /readyz, /metrics and every book answer say which one is
 * the active owner, and the standby says it is active once it has taken the partition over.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import {
  alternatingRpcCommands,
  type ConductorProcess,
  disposeAll,
  eventually,
  openReplies,
  Publisher,
  startConductor,
} from "./helpers";

let stack: TestStack;
let publisher: Publisher;
let rpc: ChannelModel;

beforeAll(async () => {
  stack = await testStack();
  publisher = await Publisher.open(stack.brokerUrl);
  rpc = await amqp.connect(stack.brokerUrl);
}, stackStartTimeoutMs);
afterEach(disposeAll);
afterAll(async () => {
  await publisher.close();
  await rpc.close().catch(() => undefined);
});

async function roleOf(conductor: ConductorProcess) {
  const ready = (await (await fetch(`${conductor.url}/readyz`)).json()) as { role?: string };
  const book = await fetch(`${conductor.url}/books/1`);
  return {
    readyz: ready.role,
    header: book.headers.get("x-matchd-role"),
    metric: await conductor.metric("matching_conductor_active"),
  };
}

test("the active conductor and its standby say which is which, and swap on a takeover", async () => {
  const partition = uniquePartition();
  const { queue, replies, close } = await openReplies(rpc);
  try {
    const { publish } = alternatingRpcCommands(publisher, partition, 91, 4, queue);
    const first = await startConductor(stack, partition);
    await publish(0, 2);
    await eventually("first commands replied", () => replies.size === 2);
    const second = await startConductor(stack, partition);
    await eventually("roles settled", async () => (await roleOf(second)).readyz === "standby");
    expect(await roleOf(first)).toEqual({ readyz: "active", header: "active", metric: 1 });
    expect(await roleOf(second)).toEqual({ readyz: "standby", header: "standby", metric: 0 });

    await first.kill9();
    await publish(2, 4);
    await eventually("the standby took over", () => replies.size === 4, 30_000);
    await eventually("it says so", async () => (await roleOf(second)).readyz === "active");
    expect(await roleOf(second)).toEqual({ readyz: "active", header: "active", metric: 1 });
  } finally {
    await close();
  }
}, 60_000);
