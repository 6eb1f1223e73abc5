/**
 * The outbox against a RabbitMQ that stops in the middle of a drain (its application stopped
 * and started again on a private node, so that the shared broker of the other tests is left
 * alone): publishing fails, is retried, and after the restart every event arrives, in order,
 * and nothing is dead-lettered.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import amqp from "amqplib";
import Redis from "ioredis";
import { allEventExchanges } from "../../src/infra/amqp/topology";
import { partitionKeys } from "../../src/infra/valkey/keys";
import { stopProcesses } from "../../src/stack/process";
import { RABBITMQ_CTL, type RunningRabbitmq, startRabbitmq } from "../../src/stack/rabbitmq";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { tempDir } from "../support/temp-dir";
import {
  deletePartitionKeys,
  eventually,
  metricNumber,
  type OutboxProcess,
  startOutbox,
  writeEvents,
} from "./helpers";

let stack: TestStack;
let broker: RunningRabbitmq;
let brokerDir: string;
let valkey: Redis;
beforeAll(async () => {
  stack = await testStack();
  brokerDir = tempDir("matchd-broker-restart-");
  broker = await startRabbitmq({ dir: brokerDir });
  valkey = new Redis(stack.datastoreUrl);
}, stackStartTimeoutMs);
afterAll(async () => {
  valkey?.disconnect();
  if (broker) await stopProcesses([...broker.processes].reverse(), 15_000, brokerDir);
}, 60_000);

/** rabbitmqctl against the private node: stop_app / start_app stop and start the broker. */
async function ctl(command: "stop_app" | "start_app"): Promise<void> {
  const child = Bun.spawn([RABBITMQ_CTL, command], {
    env: { ...process.env, ...broker.ctlEnv },
    stdout: "ignore",
    stderr: "pipe",
  });
  const code = await child.exited;
  if (code !== 0)
    throw new Error(`rabbitmqctl ${command}: ${await new Response(child.stderr).text()}`);
}

test("RabbitMQ stopped mid-drain: the outbox retries, and after the restart every event arrives in order, none dead-lettered", async () => {
  const partition = uniquePartition();
  await deletePartitionKeys(valkey, partition);
  const events = 25_000;
  // A durable queue bound to every event exchange: what was routed before the stop survives it.
  const sink = `outbox-restart-sink-${partition}`;
  const setup = await amqp.connect(broker.url);
  const channel = await setup.createChannel();
  for (const exchange of allEventExchanges) {
    await channel.assertExchange(exchange, "direct", { durable: true });
  }
  await channel.assertQueue(sink, { durable: true });
  for (const exchange of allEventExchanges) await channel.bindQueue(sink, exchange, exchange);
  await setup.close();

  let outbox: OutboxProcess | undefined;
  try {
    outbox = await startOutbox({ ...stack, brokerUrl: broker.url }, partition);
    const child = outbox;
    const published = async () =>
      metricNumber(await child.metrics(), "matching_outbox_events_published_total");
    await writeEvents(valkey, partition, 0, 2000);
    await eventually("the first events published", async () => (await published()) === 2000);
    // A backlog being drained when the broker stops (rabbitmqctl takes a second or so to
    // reach the node), then more while it is down.
    await writeEvents(valkey, partition, 2000, 22_000);
    await ctl("stop_app");
    await writeEvents(valkey, partition, 22_000, events);
    await Bun.sleep(1000);
    expect(await valkey.xlen(partitionKeys(partition).events)).toBeGreaterThan(0);
    await ctl("start_app");
    await eventually(
      "the stream drained after the restart",
      async () => (await valkey.xlen(partitionKeys(partition).events)) === 0,
      60_000,
    );
    const metrics = await child.metrics();
    expect(metricNumber(metrics, "matching_outbox_publish_retries_total")).toBeGreaterThan(0);
    expect(metricNumber(metrics, "matching_outbox_dead_letter_total")).toBe(0);
    expect(await child.stop()).toBe(0);
  } finally {
    if (outbox !== undefined && outbox.process.exitCode === null) await outbox.kill9();
  }

  // Every event, in the stream's order (first copies; a republished one may come again).
  const reader = await amqp.connect(broker.url);
  try {
    const read = await reader.createChannel();
    const seqs: number[] = [];
    for (;;) {
      const message = await read.get(sink, { noAck: true });
      if (message === false) break;
      const body = JSON.parse(message.content.toString()) as {
        partition: number;
        payload: { seq: number };
      };
      if (body.partition === partition) seqs.push(body.payload.seq);
    }
    const seen = new Set<number>();
    const firsts = seqs.filter((seq) => !seen.has(seq) && seen.add(seq));
    expect(firsts).toEqual(Array.from({ length: events }, (_, i) => i));
    console.log(
      `broker restart mid-drain: ${seqs.length} deliveries of ${events} events (${seqs.length - events} republished)`,
    );
    await read.deleteQueue(sink);
  } finally {
    await reader.close().catch(() => undefined);
  }
}, 120_000);
