/**
 * The outbox against real Valkey and RabbitMQ, run as a child process like in
 * production: order per partition, at-least-once across kill -9 and broker outages,
 * dead letters, self-healing after the stream is deleted, and the publishing lease.
 * Every check dedups by messageId the way a consumer's inbox would.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import amqp from "amqplib";
import Redis from "ioredis";
import { allEventExchanges, eventExchanges } from "../../src/infra/amqp/topology";
import { outboxConsumerGroup, partitionKeys } from "../../src/infra/valkey/keys";
import { freePorts } from "../../src/stack/process";
import { type TestStack, testStack, uniquePartition } from "../support/stack";
import {
  deletePartitionKeys,
  envelope,
  eventually,
  Inbox,
  isRoutable,
  metricNumber,
  type OutboxProcess,
  startOutbox,
  startTcpProxy,
  writeEvents,
} from "./helpers";

let stack: TestStack;
let valkey: Redis;
let cleanups: (() => Promise<unknown>)[] = [];

// Starting a private stack (RabbitMQ's boot above all) can take a while.
beforeAll(async () => {
  stack = await testStack();
  valkey = new Redis(stack.datastoreUrl);
}, 120_000);

// Each test's outboxes, inboxes and proxies go away with it, so no binding outlives it.
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  cleanups = [];
});

afterAll(() => {
  valkey?.disconnect();
});

/** Starts an outbox that is killed at the end of the file even if a test fails. */
async function outbox(
  partition: number,
  args: string[] = [],
  env: Record<string, string> = {},
  target: TestStack = stack,
): Promise<OutboxProcess> {
  const child = await startOutbox(target, partition, args, {
    MATCHING_DURABILITY: "aof-replicated",
    ...env,
  });
  cleanups.push(() => child.kill9());
  return child;
}

async function inboxFor(partition: number): Promise<Inbox> {
  const inbox = await Inbox.open(stack.brokerUrl, partition);
  cleanups.push(() => inbox.close());
  return inbox;
}

function streamLength(partition: number): Promise<number> {
  return valkey.xlen(partitionKeys(partition).events);
}

describe("outbox", () => {
  test("drains a backlog written before the group existed, in order, and shuts down cleanly", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 3000);
    const child = await outbox(partition);
    await inbox.waitFor(3000, 20_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    expect(inbox.duplicates).toBe(0);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    // The offset header is the stream entry id, and entry ids increase along the stream.
    const offsets = inbox.deliveries.map((d) => d.offset);
    expect(offsets.every((id, i) => i === 0 || compareIds(offsets[i - 1]!, id) < 0)).toBe(true);
    expect(inbox.deliveries[0]!.type).toBe("order.rested.v1");
    expect(inbox.deliveries.every((d) => d.deliveryMode === 2)).toBe(true);
    // Each command here has two events (seq 2k and 2k + 1). The second is marked as its
    // command's last, except where a full read of 500 ended on it; the first never is.
    const marked = inbox.deliveries.filter((d) => d.commandLast).map((d) => d.seq % 2);
    expect(marked.filter((ordinal) => ordinal === 0)).toEqual([]);
    expect(marked.length).toBeGreaterThanOrEqual(1500 - 3000 / 500);

    const metrics = await child.metrics();
    expect(metricNumber(metrics, "matching_outbox_events_published_total")).toBe(3000);
    expect(metricNumber(metrics, "matching_outbox_pending")).toBe(0);
    expect(metricNumber(metrics, "matching_outbox_stream_length")).toBe(0);
    expect(metricNumber(metrics, "matching_outbox_lease_held")).toBe(1);
    expect(metrics.matching_durability_policy).toEqual({ policy: "aof-replicated" });
    const ready = await fetch(`http://127.0.0.1:${child.port}/readyz`);
    expect(ready.status).toBe(200);

    expect(await child.stop()).toBe(0);
    // Graceful shutdown releases the lease so a successor need not wait for its TTL.
    expect(await valkey.exists(partitionKeys(partition).outboxLease)).toBe(0);
  }, 60_000);

  test("a stop in the middle of a drain waits for outstanding confirms and acknowledges what they confirm", async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 20_000);
    const child = await outbox(partition);
    await eventually("a part of the backlog delivered", () => inbox.byId.size >= 2000, 20_000);
    expect(await child.stop()).toBe(0);
    // Deliveries of events confirmed just before the exit may still be on their way.
    await Bun.sleep(500);
    const left = new Set(
      ((await valkey.xrange(keys.events, "-", "+")) as [string, string[]][]).map(([id]) => id),
    );
    // The stop came mid-drain, and every event that reached a consumer left the stream.
    expect(left.size).toBeGreaterThan(0);
    const delivered = inbox.deliveries.map((d) => d.offset);
    expect(delivered.filter((offset) => left.has(offset))).toEqual([]);
    expect(await valkey.exists(keys.outboxLease)).toBe(0);
  }, 60_000);

  test("--window 1 publishes and awaits each confirm, in order", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    // Enough events that the drain, one confirm at a time, outlasts several metrics polls.
    await writeEvents(valkey, partition, 0, 2000);
    const child = await outbox(partition, ["--window", "1", "--read-count", "50"]);
    // In-flight events sampled while the backlog drains (after it, the gauge is 0 anyway).
    const inFlight: number[] = [];
    while (inbox.byId.size < 2000) {
      const metrics = await child.metrics();
      if (metricNumber(metrics, "matching_outbox_stream_length") > 0)
        inFlight.push(metricNumber(metrics, "matching_outbox_in_flight"));
      await Bun.sleep(2);
    }
    expect(inFlight.length).toBeGreaterThan(3);
    expect(Math.max(...inFlight)).toBeLessThanOrEqual(1);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(inbox.duplicates).toBe(0);
    await child.stop();
  }, 60_000);

  test("malformed entries go to the dead letter with their fields and reason; the rest flows", async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 10);
    await valkey.xadd(keys.events, "*", "event", "{not json");
    await valkey.xadd(keys.events, "*", "other", "no event field");
    await valkey.xadd(
      keys.events,
      "*",
      "event",
      JSON.stringify({ eventId: "x1", type: "order.exploded.v1" }),
    );
    await valkey.xadd(keys.events, "*", "event", JSON.stringify({ type: "order.rested.v1" }));
    // An event id no AMQP message id can hold (258 bytes): published, it would be refused for
    // ever and hold up every entry behind it.
    await valkey.xadd(
      keys.events,
      "*",
      "event",
      JSON.stringify({ eventId: "€".repeat(86), type: "order.rested.v1" }),
    );
    // Far more fields than the dead-letter script's unpack takes (~8,000 values): the excess
    // is dropped and counted rather than stopping the partition at this entry.
    const manyFields = Array.from({ length: 10_000 }, (_, i) => `f${i}`);
    await valkey.xadd(keys.events, "*", ...manyFields);
    await writeEvents(valkey, partition, 10, 20);
    const child = await outbox(partition);
    await inbox.waitFor(20, 15_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    const dead = await valkey.xrange(keys.eventsDeadLetter, "-", "+");
    expect(dead.length).toBe(6);
    const fields = dead.map(([, flat]) => Object.fromEntries(pairs(flat)));
    expect(fields[0]!.event).toBe("{not json");
    expect(fields[0]!.reason).toContain("not JSON");
    expect(fields[1]!.other).toBe("no event field");
    expect(fields[2]!.reason).toContain("unknown event type");
    expect(fields[3]!.reason).toContain("eventId");
    expect(fields[4]!.reason).toContain("a message id holds at most 255");
    expect(fields[5]!.reason).toContain("no `event` field");
    expect(fields[5]!.f0).toBe("f1");
    expect(fields[5]!["dropped-fields"]).toBe("3004");
    expect(fields.every((f) => typeof f["source-id"] === "string")).toBe(true);
    const metrics = await child.metrics();
    expect(metricNumber(metrics, "matching_outbox_dead_letter_total")).toBe(6);
    expect(metricNumber(metrics, "matching_outbox_publish_retries_total")).toBe(0);
    await child.stop();
  }, 60_000);

  test("kill -9 after publishing but before XACK: republished with the same messageId, applied once", async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    // Fault injection with a real server feature: a datastore user that may do
    // everything except XACK, so the first outbox publishes but can never acknowledge.
    const user = `outbox-noack-${partition}`;
    await valkey.call("ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-xack");
    cleanups.push(() => valkey.call("ACL", "DELUSER", user));
    const noAckUrl = new URL(stack.datastoreUrl);
    noAckUrl.username = user;
    noAckUrl.password = "pw";
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 500);
    const first = await outbox(
      partition,
      ["--claim-idle-ms", "300", "--lease-ttl-ms", "2000"],
      {},
      { ...stack, datastoreUrl: noAckUrl.toString() },
    );
    await inbox.waitFor(500, 15_000);
    await first.kill9();
    const pendingAtKill = (await valkey.call("XPENDING", keys.events, outboxConsumerGroup)) as [
      number,
    ];
    expect(Number(pendingAtKill[0])).toBe(500);
    expect(await streamLength(partition)).toBe(500);
    // The first outbox kept republishing (it could never acknowledge): copies it sent just
    // before the kill may still be on their way.
    await quiet(inbox, 300);
    const deliveriesBefore = inbox.deliveries.length;

    const second = await outbox(partition, ["--claim-idle-ms", "300", "--lease-ttl-ms", "2000"]);
    await eventually(
      "stream drained after restart",
      async () => (await streamLength(partition)) === 0,
      20_000,
    );
    await eventually(
      "redeliveries arrived",
      () => inbox.deliveries.length >= deliveriesBefore + 500,
    );
    // Every event was republished under its own messageId; the inbox applied each once.
    expect(inbox.byId.size).toBe(500);
    const redelivered = inbox.deliveries.slice(deliveriesBefore);
    expect(new Set(redelivered.map((d) => d.messageId)).size).toBe(500);
    expect(redelivered.map((d) => d.seq)).toEqual([...Array(500).keys()]);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    const metrics = await second.metrics();
    expect(metricNumber(metrics, "matching_outbox_pending")).toBe(0);
    expect(metricNumber(metrics, "matching_outbox_dead_letter_total")).toBe(0);
    await second.stop();
  }, 60_000);

  test("kill -9 mid-drain and restart: nothing lost, first deliveries in order", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 10_000);
    const first = await outbox(partition, ["--claim-idle-ms", "300", "--lease-ttl-ms", "2000"]);
    await eventually("some events delivered", () => inbox.byId.size >= 2000);
    await first.kill9();
    await writeEvents(valkey, partition, 10_000, 11_000);
    const second = await outbox(partition, ["--claim-idle-ms", "300", "--lease-ttl-ms", "2000"]);
    await inbox.waitFor(11_000, 30_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    await second.stop();
  }, 60_000);

  test("broker connection lost mid-drain: retries with backoff, then everything arrives, nothing dead-lettered", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const proxy = await startTcpProxy(stack.brokerUrl);
    cleanups.push(() => proxy.close());
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 10_000);
    const child = await outbox(partition, [], {}, { ...stack, brokerUrl: proxy.url });
    await eventually("some events delivered", () => inbox.byId.size >= 1000);
    proxy.outage(1500);
    await eventually("not ready while the broker is away", async () => {
      const ready = await fetch(`http://127.0.0.1:${child.port}/readyz`);
      return ready.status === 503;
    });
    // /metrics keeps answering while the broker is unreachable.
    expect(metricNumber(await child.metrics(), "matching_outbox_lease_held")).toBe(1);
    await inbox.waitFor(10_000, 30_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    const metrics = await child.metrics();
    expect(metricNumber(metrics, "matching_outbox_publish_retries_total")).toBeGreaterThan(0);
    expect(metricNumber(metrics, "matching_outbox_dead_letter_total")).toBe(0);
    expect((await fetch(`http://127.0.0.1:${child.port}/readyz`)).status).toBe(200);
    await child.stop();
  }, 60_000);

  test("datastore connection lost mid-drain: reconnects and continues where the stream says", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const proxy = await startTcpProxy(stack.datastoreUrl);
    cleanups.push(() => proxy.close());
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 10_000);
    const child = await outbox(partition, [], {}, { ...stack, datastoreUrl: proxy.url });
    await eventually("some events delivered", () => inbox.byId.size >= 1000);
    proxy.outage(1500);
    // /metrics answers while the datastore is away (its datastore gauges keep their last values).
    expect((await fetch(child.metricsUrl)).status).toBe(200);
    await inbox.waitFor(10_000, 20_000).catch((error) => {
      console.error(child.stderr().slice(-6000));
      throw error;
    });
    await eventually("stream drained", async () => (await streamLength(partition)) === 0, 20_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(metricNumber(await child.metrics(), "matching_outbox_dead_letter_total")).toBe(0);
    await child.stop();
  }, 60_000);

  test("a datastore connection the server closes cleanly (no error) still restarts the session; nothing lost, order kept", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 1000);
    // Under memory no durability wait notices the new connection: only the reconnect does.
    const child = await outbox(partition, ["--durability", "memory"]);
    await inbox.waitFor(1000, 15_000);
    // Idle, so its reader waits in a blocking read and writes nothing the close could fail
    // with: ioredis reconnects without an error. A read whose reply such a close loses may
    // have moved entries into the pending list (a race no test can force); the session must
    // restart and re-read that list either way.
    const clients = String(await valkey.call("CLIENT", "LIST"));
    // Lazy: a later field, lib-name, ends in "name=" too.
    const reader = /^id=(\d+) .*? name=(\S*)/gm;
    const ids = [...clients.matchAll(reader)]
      .filter((match) => match[2] === `matchd-outbox-p${partition}-reader`)
      .map((match) => match[1]!);
    expect(ids.length).toBe(1);
    expect(Number(await valkey.call("CLIENT", "KILL", "ID", ids[0]!))).toBe(1);
    // Restored (with no error before it, unless the close caught a write in flight), and the
    // session ended for it and started again.
    await eventually(
      "the session restarted",
      () =>
        /"message":"datastore connection restored"[^\n]*"role":"reader"/.test(child.stderr()) &&
        child.stderr().includes("outbox retrying after backoff"),
    );
    await writeEvents(valkey, partition, 1000, 2000);
    await inbox.waitFor(2000, 15_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    await child.stop();
  }, 60_000);

  test("unroutable events are retried, counted and reported as degraded until a queue is bound", async () => {
    const exchange = "messages:order:reject";
    // The contract's exchanges are shared by every test on this broker: run only when
    // nothing else has a queue bound to this one right now.
    // A skip here would look like a pass: a leaked binding is a test bug, so fail loudly.
    if (await isRoutable(stack.brokerUrl, exchange)) {
      throw new Error(`something is bound to ${exchange}: a test leaked an inbox`);
    }
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await Inbox.open(stack.brokerUrl, partition, []);
    cleanups.push(() => inbox.close());
    await writeEvents(valkey, partition, 0, 50, "order.rejected.v1");
    const child = await outbox(partition);
    await eventually(
      "unroutable counted",
      async () => metricNumber(await child.metrics(), "matching_outbox_unroutable_total") > 0,
    );
    const degraded = (await (await fetch(`http://127.0.0.1:${child.port}/readyz`)).json()) as {
      status: string;
    };
    expect(degraded.status).toBe("degraded");
    expect(await streamLength(partition)).toBe(50);
    const attempts = partitionKeys(partition).outboxAttempts;
    await eventually("attempts recorded", async () => (await valkey.hlen(attempts)) > 0);
    await inbox.bind(exchange);
    await inbox.waitFor(50, 20_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    // Delivered events leave no attempt counters behind.
    await eventually("attempt counters cleared", async () => (await valkey.hlen(attempts)) === 0);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    const metrics = await child.metrics();
    expect(metricNumber(metrics, "matching_outbox_publish_retries_total")).toBeGreaterThan(0);
    expect(metricNumber(metrics, "matching_outbox_dead_letter_total")).toBe(0);
    const ready = (await (await fetch(`http://127.0.0.1:${child.port}/readyz`)).json()) as {
      status: string;
    };
    expect(ready.status).toBe("ready");
    await child.stop();
  }, 60_000);

  test("nacked events (a full queue that rejects publishes) are retried, never dead-lettered, until the queue takes them", async () => {
    const exchange = "messages:order:reject";
    if (await isRoutable(stack.brokerUrl, exchange)) {
      throw new Error(`something is bound to ${exchange}: a test leaked an inbox`);
    }
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const connection = await amqp.connect(stack.brokerUrl);
    cleanups.push(() => connection.close().catch(() => undefined));
    const channel = await connection.createChannel();
    // Holds 5 messages; the broker nacks every publish beyond them.
    const { queue } = await channel.assertQueue("", {
      exclusive: true,
      arguments: { "x-max-length": 5, "x-overflow": "reject-publish" },
    });
    await channel.bindQueue(queue, exchange, exchange);
    await writeEvents(valkey, partition, 0, 20, "order.rejected.v1");
    const child = await outbox(partition);
    await eventually(
      "nacks retried",
      async () => metricNumber(await child.metrics(), "matching_outbox_publish_retries_total") > 0,
    );
    expect(await streamLength(partition)).toBeGreaterThan(0);
    // Space at last: the retries get every event through.
    const received: number[] = [];
    await channel.consume(
      queue,
      (message) => {
        if (message === null) return;
        const body = JSON.parse(message.content.toString()) as {
          partition: number;
          payload: { seq: number };
        };
        // Another publisher on the exchange is not this test's business.
        if (body.partition === partition) received.push(body.payload.seq);
      },
      { noAck: true },
    );
    await eventually("every event received", () => new Set(received).size === 20, 30_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    expect([...new Set(received)].sort((a, b) => a - b)).toEqual(
      Array.from({ length: 20 }, (_, i) => i),
    );
    expect(metricNumber(await child.metrics(), "matching_outbox_dead_letter_total")).toBe(0);
    expect(await valkey.xlen(partitionKeys(partition).eventsDeadLetter)).toBe(0);
    await child.stop();
  }, 60_000);

  test("stream deleted in the middle of a large drain: the outbox survives and delivers what comes next", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 30_000);
    const child = await outbox(partition);
    // Mid-drain, with full batches and a read-ahead in flight, every key goes.
    await eventually("a part delivered", () => inbox.byId.size >= 3000, 20_000);
    await deletePartitionKeys(valkey, partition);
    await Bun.sleep(500);
    expect(child.process.exitCode).toBeNull();
    await writeEvents(valkey, partition, 30_000, 30_100);
    const fresh = () =>
      new Set(inbox.deliveries.filter((d) => d.seq >= 30_000).map((d) => d.messageId)).size;
    await eventually("the new events delivered", () => fresh() === 100, 20_000);
    expect(child.process.exitCode).toBeNull();
    await child.stop();
  }, 60_000);

  test("stream and group deleted while running: /metrics stays up, the group is recreated, delivery continues", async () => {
    const held = "messages:order:reject";
    // An unroutable event holds its entries pending, so that the gauges have something to
    // lose; nothing else may have a queue bound to that exchange (see the unroutable test).
    if (await isRoutable(stack.brokerUrl, held)) {
      throw new Error(`something is bound to ${held}: a test leaked an inbox`);
    }
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    const inbox = await Inbox.open(
      stack.brokerUrl,
      partition,
      allEventExchanges.filter((exchange) => exchange !== held),
    );
    cleanups.push(() => inbox.close());
    await writeEvents(valkey, partition, 0, 100);
    const child = await outbox(partition);
    await inbox.waitFor(100, 15_000);
    await writeEvents(valkey, partition, 100, 110, "order.rejected.v1");
    await eventually("the gauges see the held entries", async () => {
      const metrics = await child.metrics();
      return (
        metricNumber(metrics, "matching_outbox_pending") > 0 &&
        metricNumber(metrics, "matching_outbox_stream_length") > 0
      );
    });
    // What benchmark harnesses do: delete every key of the partition, lease included.
    await deletePartitionKeys(valkey, partition);
    const response = await fetch(child.metricsUrl);
    expect(response.status).toBe(200);
    const metrics = (await response.json()) as Record<string, unknown>;
    expect(metricNumber(metrics, "matching_outbox_pending")).toBe(0);
    expect(metricNumber(metrics, "matching_outbox_stream_length")).toBe(0);
    await inbox.bind(held);
    await writeEvents(valkey, partition, 110, 200);
    // The held events went with the keys: 100 before, 90 after.
    await inbox.waitFor(190, 15_000);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
    const groups = (await valkey.call("XINFO", "GROUPS", keys.events)) as unknown[][];
    expect(groups.map((g) => g[1])).toEqual([outboxConsumerGroup]);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(metricNumber(await child.metrics(), "matching_outbox_dead_letter_total")).toBe(0);
    await child.stop();
  }, 60_000);

  test("a holder that loses its lease in the middle of a drain stops publishing within its window", async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await writeEvents(valkey, partition, 0, 50_000);
    const child = await outbox(partition, ["--lease-ttl-ms", "1500", "--window", "200"]);
    await eventually("a part delivered", () => inbox.byId.size >= 2000, 20_000);
    // Someone else owns the lease now: the next renewal (every 500 ms) fails.
    await valkey.set(keys.outboxLease, "someone-else", "PX", 60_000);
    await eventually(
      "lease lost",
      async () => metricNumber(await child.metrics(), "matching_outbox_lease_held") === 0,
      5000,
    );
    // Counted at the outbox (the test's own consumer may lag behind the broker): publishes
    // confirmed after the loss are at most the window that was in flight, then nothing.
    const published = async () =>
      metricNumber(await child.metrics(), "matching_outbox_events_published_total");
    const atLoss = await published();
    // Until the window that was in flight has settled (confirmed or given up), then a pause.
    await eventually(
      "nothing in flight",
      async () => metricNumber(await child.metrics(), "matching_outbox_in_flight") === 0,
      15_000,
    );
    const settled = await published();
    expect(settled - atLoss).toBeLessThanOrEqual(200);
    await Bun.sleep(1000);
    expect(await published()).toBe(settled);
    expect(await streamLength(partition)).toBeGreaterThan(0);
    await child.stop();
  }, 60_000);

  test("a holder that loses its lease stops publishing at once and resumes when it gets it back", async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    const child = await outbox(partition, ["--lease-ttl-ms", "1500"]);
    await eventually(
      "lease held",
      async () => metricNumber(await child.metrics(), "matching_outbox_lease_held") === 1,
    );
    // Someone else now owns the lease (as after a partition heal): the renewal fails. It is
    // theirs until deleted, so how fast the loss is noticed does not matter.
    await valkey.set(keys.outboxLease, "someone-else", "PX", 60_000);
    await eventually(
      "lease lost",
      async () => metricNumber(await child.metrics(), "matching_outbox_lease_held") === 0,
      10_000,
    );
    await writeEvents(valkey, partition, 0, 50);
    await Bun.sleep(700);
    expect(inbox.deliveries.length).toBe(0);
    await valkey.del(keys.outboxLease);
    await inbox.waitFor(50, 15_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    await child.stop();
  }, 60_000);

  test("two outboxes on one partition: only the lease holder publishes; the standby takes over within the TTL", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    const args = ["--lease-ttl-ms", "2000", "--claim-idle-ms", "300"];
    const a = await outbox(partition, args);
    await eventually(
      "a holds the lease",
      async () => metricNumber(await a.metrics(), "matching_outbox_lease_held") === 1,
    );
    const b = await outbox(partition, args);
    await writeEvents(valkey, partition, 0, 200);
    await inbox.waitFor(200, 15_000);
    // A delivery can reach the inbox before its confirm reaches the outbox.
    await eventually(
      "a counted every confirm",
      async () => metricNumber(await a.metrics(), "matching_outbox_events_published_total") === 200,
    );
    const [ma, mb] = [await a.metrics(), await b.metrics()];
    expect(metricNumber(ma, "matching_outbox_events_published_total")).toBe(200);
    expect(metricNumber(mb, "matching_outbox_events_published_total")).toBe(0);
    expect(metricNumber(mb, "matching_outbox_lease_held")).toBe(0);
    const standby = (await (await fetch(`http://127.0.0.1:${b.port}/readyz`)).json()) as {
      reasons: string[];
    };
    expect(standby.reasons[0]).toContain("standby");

    await a.kill9();
    const killedAt = Date.now();
    await eventually(
      "b takes the lease",
      async () => metricNumber(await b.metrics(), "matching_outbox_lease_held") === 1,
      5000,
    );
    const takeoverMs = Date.now() - killedAt;
    console.log(`lease takeover ${takeoverMs} ms after the holder's kill (TTL 2000 ms)`);
    // About the TTL: the key expires 1.3-2 s after the kill (renewed every TTL/3) and the
    // standby retries right then (its holder's remaining TTL + 5 ms), plus a margin for
    // /metrics polling and timers on a busy machine.
    expect(takeoverMs).toBeLessThan(2000 + 1000);
    await writeEvents(valkey, partition, 200, 400);
    await inbox.waitFor(400, 15_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    await b.stop();
  }, 60_000);
  test("a lease holder that cannot reach the broker hands the lease over to one that can", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    const args = ["--lease-ttl-ms", "1000", "--claim-idle-ms", "300"];
    const closedPort = (await freePorts(1))[0]!;
    const cutOff = await outbox(
      partition,
      args,
      {},
      {
        ...stack,
        brokerUrl: `amqp://guest:guest@127.0.0.1:${closedPort}/matchd`,
      },
    );
    await eventually(
      "the cut-off outbox holds the lease",
      async () => metricNumber(await cutOff.metrics(), "matching_outbox_lease_held") === 1,
    );
    const healthy = await outbox(partition, args);
    await writeEvents(valkey, partition, 0, 100);
    // Three TTLs without the broker, then the hand-over and the healthy one's first drain.
    await inbox.waitFor(100, 20_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(cutOff.stderr()).toContain("outbox lease handed over: this outbox cannot publish");
    expect(metricNumber(await healthy.metrics(), "matching_outbox_lease_held")).toBe(1);
    await healthy.stop();
    await cutOff.stop();
  }, 60_000);

  test("entries another consumer left pending go out before this consumer's own pending ones, in stream order", async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    await writeEvents(valkey, partition, 0, 10);
    await valkey.call("XGROUP", "CREATE", keys.events, outboxConsumerGroup, "0", "MKSTREAM");
    // Someone else holds the lease, so the outbox waits as a standby.
    await valkey.set(keys.outboxLease, "another-outbox", "PX", 60_000);
    const child = await outbox(partition, ["--claim-idle-ms", "100"]);
    const ownerPattern = /"outbox started".*?"owner":"([^"]+)"/;
    // The child's stderr is read in the background: the line may trail /healthz.
    await eventually("the outbox logged its owner id", () => ownerPattern.test(child.stderr()));
    const owner = ownerPattern.exec(child.stderr())?.[1];
    expect(owner).toBeDefined();
    // A former holder read the first five; this outbox, in an earlier session, the next five.
    const read = (consumer: string) =>
      valkey.call(
        "XREADGROUP",
        "GROUP",
        outboxConsumerGroup,
        consumer,
        "COUNT",
        "5",
        "STREAMS",
        keys.events,
        ">",
      );
    await read("former-holder");
    await read(owner!);
    await Bun.sleep(200);
    const inbox = await inboxFor(partition);
    await valkey.del(keys.outboxLease);
    await inbox.waitFor(10, 20_000);
    // Delivering its own pending list first would send 5..9 before 0..4.
    expect(inbox.deliveries.slice(0, 10).map((d) => d.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
  }, 60_000);

  test("entries a former holder reads late are delivered, and before anything read after them", async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    await deletePartitionKeys(valkey, partition);
    const inbox = await inboxFor(partition);
    await outbox(partition, ["--claim-idle-ms", "100"]);
    await writeEvents(valkey, partition, 0, 3);
    await inbox.waitFor(3, 20_000);
    // A late read by a former holder, atomic with the writes so the holder's own blocked
    // read cannot take these entries first.
    const late = valkey.multi();
    for (let n = 3; n < 6; n++)
      late.xadd(keys.events, "*", "event", JSON.stringify(envelope(partition, n)));
    late.call(
      "XREADGROUP",
      "GROUP",
      outboxConsumerGroup,
      "former-holder",
      "COUNT",
      "10",
      "STREAMS",
      keys.events,
      ">",
    );
    await late.exec();
    await writeEvents(valkey, partition, 6, 9);
    // Without the check the holder publishes 6..8 and leaves 3..5 pending with the former holder.
    await inbox.waitFor(9, 20_000);
    expect(inbox.deliveries.map((d) => d.seq).slice(0, 9)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    await eventually("stream drained", async () => (await streamLength(partition)) === 0);
  }, 60_000);

  test("broker outages while idle never grow the backoff: each retry starts from the first step", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    const proxy = await startTcpProxy(stack.brokerUrl);
    cleanups.push(() => proxy.close());
    const child = await outbox(partition, [], {}, { ...stack, brokerUrl: proxy.url });
    const attempts = () =>
      [...child.stderr().matchAll(/"outbox retrying after backoff".*?"attempt":(\d+)/g)].map(
        (match) => Number(match[1]),
      );
    // The attempt number of the first retry after each outage (a reconnect that lands inside
    // the outage fails again and counts up; the next outage must start from 1 again).
    const firstRetries: number[] = [];
    for (let outage = 1; outage <= 3; outage++) {
      await eventually("ready with nothing to publish", async () => {
        return (await fetch(`http://127.0.0.1:${child.port}/readyz`)).status === 200;
      });
      // Let the reconnected session finish an empty read (a 500 ms block after a few round
      // trips), which resets the backoff, before the next cut: with room for a slow machine.
      await Bun.sleep(3000);
      const before = attempts().length;
      proxy.outage(300);
      await eventually(`a retry after outage ${outage}`, () => attempts().length > before, 20_000);
      firstRetries.push(attempts()[before]!);
    }
    // Without the reset the counter carries over from one outage to the next (1, 2, 3, ...).
    expect(firstRetries).toEqual([1, 1, 1]);
  }, 60_000);

  test("a refused exchange declaration is retried with backoff, never a crash, until it is fixed", async () => {
    const partition = uniquePartition();
    await deletePartitionKeys(valkey, partition);
    // The events all go to one exchange and another one is broken: the outbox declares every
    // event exchange when it opens its channel, so the broken one stops it all the same.
    await writeEvents(valkey, partition, 0, 20, "order.filled.v1");
    const exchange = eventExchanges["order.rejected.v1"];
    const admin = await amqp.connect(stack.brokerUrl);
    const redeclare = async (type: "direct" | "fanout") => {
      const channel = await admin.createChannel();
      await channel.deleteExchange(exchange);
      await channel.assertExchange(exchange, type, { durable: true });
      await channel.close();
    };
    try {
      // Another type under the contract's name: every declaration by the outbox gets a 406.
      await redeclare("fanout");
      // Bound from the start, so no event can come back unroutable and overtake another.
      const inbox = await Inbox.open(
        stack.brokerUrl,
        partition,
        allEventExchanges.filter((name) => name !== exchange),
      );
      cleanups.push(() => inbox.close());
      const child = await outbox(partition);
      await eventually(
        "two refused opens",
        () => child.stderr().split("cannot open the broker channel").length > 2,
      );
      expect(child.process.exitCode).toBeNull();
      expect(child.stderr()).not.toContain("uncaught");
      await redeclare("direct");
      await inbox.waitFor(20, 30_000);
      expect(inbox.firstDeliveryOrderKept()).toBe(true);
    } finally {
      await redeclare("direct").catch(() => undefined);
      await admin.close().catch(() => undefined);
    }
  }, 60_000);
});

/** Waits until the inbox has received nothing for `ms`. */
async function quiet(inbox: Inbox, ms: number): Promise<void> {
  for (;;) {
    const before = inbox.deliveries.length;
    await Bun.sleep(ms);
    if (inbox.deliveries.length === before) return;
  }
}

function compareIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(Number) as [number, number];
  const [bm, bs] = b.split("-").map(Number) as [number, number];
  return am !== bm ? am - bm : as - bs;
}

function pairs(flat: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}
