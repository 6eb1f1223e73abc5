/**
 * The outbox killed on purpose after the broker confirmed a run of events and before their
 * stream entries were acknowledged (MATCHD_KILL_AT=after-publish:N, see
 * src/infra/kill-point.ts), then restarted without it: every event written arrives, the only
 * duplicates are republished copies under the same event id with byte-identical bodies, first
 * deliveries keep the stream's order, and the stream is drained.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import Redis from "ioredis";
import { allEventExchanges } from "../../src/infra/amqp/topology";
import { partitionKeys } from "../../src/infra/valkey/keys";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import {
  deletePartitionKeys,
  envelope,
  eventually,
  metricNumber,
  type OutboxProcess,
  startOutbox,
  writeEvents,
} from "./helpers";

let stack: TestStack;
let valkey: Redis;
beforeAll(async () => {
  stack = await testStack();
  valkey = new Redis(stack.datastoreUrl);
}, stackStartTimeoutMs);
afterAll(() => valkey?.disconnect());

/** Every delivery of one partition's events, bodies as received, through one bound queue. */
async function openRecorder(
  brokerUrl: string,
  partition: number,
): Promise<{ deliveries: { eventId: string; body: string }[]; close(): Promise<void> }> {
  const connection: ChannelModel = await amqp.connect(brokerUrl);
  const channel = await connection.createChannel();
  const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
  for (const exchange of allEventExchanges) {
    await channel.assertExchange(exchange, "direct", { durable: true });
    await channel.bindQueue(queue, exchange, exchange);
  }
  const deliveries: { eventId: string; body: string }[] = [];
  await channel.consume(
    queue,
    (message) => {
      if (!message) return;
      const body = message.content.toString("utf8");
      // The contract's exchanges are shared with other tests: only this partition's events.
      if ((JSON.parse(body) as { partition: number }).partition !== partition) return;
      deliveries.push({ eventId: String(message.properties.messageId), body });
    },
    { noAck: true },
  );
  return { deliveries, close: () => connection.close().catch(() => undefined) };
}

test("after-publish: confirmed and not yet acknowledged events are republished, identical, none lost", async () => {
  const partition = uniquePartition();
  const total = 3000;
  await deletePartitionKeys(valkey, partition);
  const recorder = await openRecorder(stack.brokerUrl, partition);
  const args = ["--claim-idle-ms", "300", "--lease-ttl-ms", "2000"];
  let outbox: OutboxProcess | undefined;
  try {
    await writeEvents(valkey, partition, 0, total);
    const expected = new Map<string, { seq: number; body: string }>();
    for (let n = 0; n < total; n++) {
      const event = envelope(partition, n);
      expected.set(event.eventId, { seq: n, body: JSON.stringify(event) });
    }

    outbox = await startOutbox(stack, partition, args, { MATCHD_KILL_AT: "after-publish:3" });
    const first = outbox;
    const exited = await Promise.race([first.process.exited, Bun.sleep(20_000)]);
    if (exited === undefined) await first.kill9();
    expect(first.process.signalCode).toBe("SIGKILL");
    expect(first.stderr()).toContain("kill point after-publish:3 reached");
    const stream = partitionKeys(partition).events;
    // Killed mid-drain: entries left, among them the run that was confirmed and not acknowledged.
    expect(await valkey.xlen(stream)).toBeGreaterThan(0);
    const deliveredBefore = recorder.deliveries.length;

    outbox = await startOutbox(stack, partition, args);
    const second = outbox;
    await eventually(
      "every event delivered",
      () => new Set(recorder.deliveries.map((d) => d.eventId)).size === total,
      30_000,
    );
    await eventually("the stream drained", async () => (await valkey.xlen(stream)) === 0);

    const unexpected = recorder.deliveries.filter((d) => expected.get(d.eventId)?.body !== d.body);
    expect(unexpected.slice(0, 3)).toEqual([]);
    const firstSeen = new Set<string>();
    const firstOrder: number[] = [];
    for (const { eventId } of recorder.deliveries) {
      if (firstSeen.has(eventId)) continue;
      firstSeen.add(eventId);
      firstOrder.push(expected.get(eventId)!.seq);
    }
    expect(firstOrder).toEqual([...Array(total).keys()]);
    const duplicates = recorder.deliveries.length - total;
    console.log(
      `after-publish:3: ${deliveredBefore} delivered before the kill, ${duplicates} republished`,
    );
    // The confirmed run the kill left unacknowledged came again.
    expect(duplicates).toBeGreaterThan(0);
    expect(metricNumber(await second.metrics(), "matching_outbox_dead_letter_total")).toBe(0);
    expect(await second.stop()).toBe(0);
  } finally {
    if (outbox !== undefined && outbox.process.exitCode === null) await outbox.kill9();
    await recorder.close();
    await deletePartitionKeys(valkey, partition);
  }
}, 45_000);
