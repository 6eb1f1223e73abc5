/**
 * The conductor end to end against the real stack: the contract's reference counts for
 * the alternating workload, the keys of a resting order, RPC replies, redelivery of a
 * processed command and an order retried under a new command id; and, with an outbox, stop
 * orders, amend, cancel-all and a halt, their results by RPC and their events on the
 * exchanges docs/orders.md names.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import { createWorkload } from "../../bench/workloads";
import { brokerUser } from "../../src/cli/client/rpc";
import { bookMember } from "../../src/conductor/store";
import type { EventEnvelope } from "../../src/domain/index";
import { allEventExchanges, eventExchanges } from "../../src/infra/amqp/topology";
import { startOutbox } from "../outbox/helpers";
import { stackStartTimeoutMs, testStack, uniquePartition } from "../support/stack";
import {
  conductorSuite,
  eventually,
  openReplies,
  PartitionStore,
  partitionCount,
  removePartition,
  startConductor,
} from "./helpers";
import { OrderCommands } from "./order-commands";

const suite = conductorSuite();

describe("reference counts", () => {
  test("alternating bid/ask at 100 x 1: 2 events per command, empty book, no failures", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 11, partition, partitionCount });
      const pairId = workload.pairIds[0]!;
      expect(pairId).toBe(partition);
      const conductor = await startConductor(suite.stack, partition);

      // One bid first: it rests, with its order hash and its sorted-set member.
      const bid = workload.next(0);
      await suite.publisher.publish(partition, [bid]);
      await eventually(
        "first bid processed",
        async () => (await conductor.metric("matching_commands_processed_total")) === 1,
      );
      const orderId = bid.type === "order.place" ? bid.payload.id : "";
      const hash = await store.valkey.hgetall(store.keys.order(orderId));
      expect(hash).toMatchObject({
        id: orderId,
        pairId: String(pairId),
        side: "bid",
        price: "100",
        volume: "1",
      });
      const members = await store.valkey.zrange(
        store.keys.bookRates(pairId, "bid"),
        0,
        -1,
        "WITHSCORES",
      );
      expect(members).toEqual([
        bookMember({ id: orderId, sequence: Number(hash.sequence) } as never),
        "100",
      ]);
      expect(await store.eventCount()).toBe(1);
      const resting = await fetch(`${conductor.url}/orders/${orderId}`);
      expect(resting.status).toBe(200);
      expect(await resting.json()).toMatchObject({ id: orderId, side: "bid", price: "100" });
      const book = (await (
        await fetch(`${conductor.url}/books/${pairId}?depth=5`)
      ).json()) as Record<string, unknown>;
      expect(book).toMatchObject({
        pairId,
        bids: [{ price: "100", volume: "1", orders: 1 }],
        asks: [],
      });

      const n = 200;
      const rest = Array.from({ length: n - 1 }, (_, i) => workload.next(i + 1));
      await suite.publisher.publish(partition, rest);
      await eventually(
        `${n} commands processed`,
        async () => (await conductor.metric("matching_commands_processed_total")) === n,
        20_000,
      );
      expect(await store.eventCount()).toBe(2 * n);
      expect(await store.bookSizes(pairId)).toEqual({ bids: 0, asks: 0 });
      const metrics = await conductor.metrics();
      expect(metrics.matching_command_failures_total).toBe(0);
      expect(metrics.matching_events_created_total).toBe(2 * n);
      expect(metrics.matching_commands_duplicate_total).toBe(0);
      expect(metrics.matching_durability_timeouts_total).toBe(0);
      // Under aof-replicated every batch's wait is timed, on the wait itself: once a batch.
      const waits = metrics.matching_stage_durability_wait_seconds as { count: number };
      expect(waits.count).toBeGreaterThan(0);
      expect(waits.count).toBe(metrics.matching_batches_total as number);
      const stored = await store.storedResults(rest.map((c) => c.commandId));
      expect(stored.size).toBe(n - 1);
      expect(
        await (await fetch(`${conductor.url}/commands/${bid.commandId}`)).json(),
      ).toMatchObject({
        commandId: bid.commandId,
        status: "accepted",
        orderStatus: "rested",
      });
      expect((await fetch(`${conductor.url}/commands/never-seen`)).status).toBe(404);
      expect(await store.valkey.exists(store.keys.order(orderId))).toBe(0);
      const digest = (await (await fetch(`${conductor.url}/digest`)).json()) as {
        restingOrders: number;
      };
      expect(digest.restingOrders).toBe(0);
      const prometheus = await (
        await fetch(`${conductor.url}/metrics`, { headers: { accept: "text/plain" } })
      ).text();
      expect(prometheus).toContain("matching_commands_processed_total");

      expect(await conductor.stop()).toBe(0);
      expect(await suite.publisher.messageCount(partition)).toBe(0);
    } finally {
      store.close();
      await suite.publisher.deleteQueue(partition);
    }
  }, 60_000);
});

describe("RPC and idempotency", () => {
  let rpc: ChannelModel;
  beforeAll(async () => {
    rpc = await amqp.connect((await testStack()).brokerUrl);
  }, stackStartTimeoutMs);
  afterAll(async () => {
    await rpc.close().catch(() => undefined);
  });

  test("replies carry the correlation id; redelivery and retried orders write nothing new", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    const channel = await rpc.createChannel();
    try {
      const { queue: replyQueue } = await channel.assertQueue("", {
        exclusive: true,
        autoDelete: true,
      });
      const replies: { correlationId: string; body: Record<string, unknown> }[] = [];
      await channel.consume(
        replyQueue,
        (message) => {
          if (!message) return;
          replies.push({
            correlationId: String(message.properties.correlationId),
            body: JSON.parse(message.content.toString()) as Record<string, unknown>,
          });
        },
        { noAck: true },
      );
      const conductor = await startConductor(suite.stack, partition);
      const workload = createWorkload("alternating", { seed: 12, partition, partitionCount });
      const bid = workload.next(0);

      const sentAt = Date.now();
      await suite.publisher.publish(partition, [bid], {
        replyTo: replyQueue,
        correlationId: "rpc-1",
      });
      await eventually("first reply", () => replies.length === 1);
      // The batch's time, read from the wall clock between the send and the reply.
      const { transactTime } = replies[0]!.body as { transactTime: number };
      expect(transactTime).toBeGreaterThanOrEqual(sentAt);
      expect(transactTime).toBeLessThanOrEqual(Date.now());
      expect(replies[0]!.correlationId).toBe("rpc-1");
      expect(replies[0]!.body).toMatchObject({
        commandId: bid.commandId,
        status: "accepted",
        orderStatus: "rested",
      });
      expect(await store.eventCount()).toBe(1);

      // The same command again (a broker redelivery, or a producer resend): the stored result.
      await suite.publisher.publish(partition, [bid], {
        replyTo: replyQueue,
        correlationId: "rpc-2",
      });
      await eventually("redelivery reply", () => replies.length === 2);
      expect(replies[1]!.correlationId).toBe("rpc-2");
      expect(replies[1]!.body).toEqual(replies[0]!.body);
      expect(await store.eventCount()).toBe(1);

      // The same order under a new command id: a duplicate, no events, book unchanged.
      const retried = { ...bid, commandId: `${bid.commandId}-retry` };
      await suite.publisher.publish(partition, [retried], {
        replyTo: replyQueue,
        correlationId: "rpc-3",
      });
      await eventually("retry reply", () => replies.length === 3);
      expect(replies[2]!.correlationId).toBe("rpc-3");
      expect(replies[2]!.body).toMatchObject({
        commandId: retried.commandId,
        status: "duplicate",
        events: 0,
      });
      expect(await store.eventCount()).toBe(1);
      expect(await store.bookSizes(partition)).toEqual({ bids: 1, asks: 0 });

      // A message without a readable command id is dead-lettered, and its request answered.
      await suite.publisher.publish(partition, ["{not json"], {
        replyTo: replyQueue,
        correlationId: "rpc-4",
      });
      await eventually("unreadable reply", () => replies.length === 4);
      expect(replies[3]!.correlationId).toBe("rpc-4");
      expect(replies[3]!.body).toMatchObject({
        commandId: "unidentified",
        status: "rejected",
        code: 200,
        events: 0,
      });
      expect(await conductor.metric("matching_commands_dead_letter_total")).toBe(1);
      expect(await store.eventCount()).toBe(1);

      // Both kinds of duplicate inside one batch, next to fresh commands: still one application each.
      const ask = workload.next(1);
      await suite.publisher.publish(partition, [
        ask,
        ask,
        { ...ask, commandId: `${ask.commandId}-retry` },
        bid,
      ]);
      await eventually(
        "batch with duplicates done",
        async () => (await conductor.metric("matching_commands_duplicate_total")) >= 5,
      );
      expect(await store.eventCount()).toBe(1 + 3);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      const metrics = await conductor.metrics();
      expect(metrics.matching_commands_duplicate_total).toBe(5);
      expect(metrics.matching_command_failures_total).toBe(0);
      expect(await conductor.stop()).toBe(0);
      expect(await suite.publisher.messageCount(partition)).toBe(0);
    } finally {
      await channel.close().catch(() => undefined);
      store.close();
      await suite.publisher.deleteQueue(partition);
    }
  }, 60_000);
});

test("a cancel of an order filled before a restart is 'already finished', not 'unknown': the marker answers for the lost memory", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  try {
    const workload = createWorkload("alternating", { seed: 12, partition, partitionCount });
    const [bid, ask] = [workload.next(0), workload.next(1)];
    const first = await startConductor(suite.stack, partition);
    await suite.publisher.publish(partition, [bid, ask]);
    await eventually(
      "the bid filled",
      async () => (await first.metric("matching_commands_processed_total")) === 2,
    );
    expect(await first.stop()).toBe(0);

    const second = await startConductor(suite.stack, partition);
    const orderId = bid.type === "order.place" ? bid.payload.id : "";
    const userId = bid.type === "order.place" ? bid.payload.userId : "";
    const cancel = {
      ...bid,
      commandId: `${bid.commandId}-cancel`,
      type: "order.cancel" as const,
      payload: { id: orderId, userId, pairId: bid.pairId },
    };
    await suite.publisher.publish(partition, [cancel]);
    await eventually(
      "the cancel processed",
      async () => (await second.metric("matching_commands_processed_total")) === 1,
    );
    const stored = await store.storedResults([cancel.commandId]);
    expect(stored.get(cancel.commandId)).toMatchObject({
      status: "rejected",
      codeName: "order-already-finished",
    });
    expect(await second.stop()).toBe(0);
  } finally {
    store.close();
    await suite.publisher.deleteQueue(partition);
  }
}, 60_000);

test("under the memory policy no durability wait is timed: the histogram times only WAITAOF", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const conductor = await startConductor(suite.stack, partition, {
    env: { MATCHING_DURABILITY: "memory" },
  });
  try {
    const workload = createWorkload("alternating", { seed: 21, partition, partitionCount });
    await suite.publisher.publish(
      partition,
      Array.from({ length: 40 }, (_, i) => workload.next(i)),
    );
    await eventually(
      "40 commands processed",
      async () => (await conductor.metric("matching_commands_processed_total")) === 40,
    );
    const metrics = await conductor.metrics();
    expect((metrics.matching_stage_commit_seconds as { count: number }).count).toBeGreaterThan(0);
    // Before, every batch was observed here, from its commit to its acknowledgement.
    expect((metrics.matching_stage_durability_wait_seconds as { count: number }).count).toBe(0);
    expect(await conductor.stop()).toBe(0);
  } finally {
    store.close();
    await suite.publisher.deleteQueue(partition);
  }
}, 60_000);

test("a request with replyTo but no AMQP correlationId gets its reply under the envelope's correlationId", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const rpc: ChannelModel = await amqp.connect(suite.stack.brokerUrl);
  const { queue, replies, close } = await openReplies(rpc);
  try {
    await startConductor(suite.stack, partition);
    const workload = createWorkload("alternating", { seed: 23, partition, partitionCount });
    const command = workload.next(0);
    await suite.publisher.publish(partition, [command], { replyTo: queue });
    await eventually("the reply", () => replies.size === 1);
    expect(replies.get(command.correlationId)).toMatchObject({
      commandId: command.commandId,
      status: "accepted",
    });
  } finally {
    await close();
    await rpc.close().catch(() => undefined);
    await removePartition(store, suite.publisher, partition);
  }
}, 60_000);

test("amend, cancel-all, stops and a halt over the real pipeline: results by RPC, events on their exchanges", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const rpc: ChannelModel = await amqp.connect(suite.stack.brokerUrl);
  const { queue, replies, close } = await openReplies(rpc);
  // Every event exchange into one queue, each event kept with the exchange it came by.
  const events: { exchange: string; event: EventEnvelope }[] = [];
  const sink = await rpc.createChannel();
  const { queue: eventQueue } = await sink.assertQueue("", { exclusive: true, autoDelete: true });
  for (const exchange of allEventExchanges) {
    await sink.assertExchange(exchange, "direct", { durable: true });
    await sink.bindQueue(eventQueue, exchange, exchange);
  }
  await sink.consume(
    eventQueue,
    (message) => {
      if (message === null) return;
      const event = JSON.parse(message.content.toString()) as EventEnvelope;
      // Other tests share the exchanges: this partition's events only.
      if (event.partition === partition) events.push({ exchange: message.fields.exchange, event });
    },
    { noAck: true },
  );
  const user = brokerUser(suite.stack.brokerUrl);
  const outbox = await startOutbox(suite.stack, partition);
  try {
    await startConductor(suite.stack, partition, { env: { MATCHING_OPERATOR_USERS: user } });
    const b = new OrderCommands(partition);
    const call = async (command: ReturnType<OrderCommands["place"]>) => {
      await suite.publisher.publish(partition, [command], {
        replyTo: queue,
        correlationId: command.commandId,
        userId: user,
      });
      await eventually(`the reply to ${command.commandId}`, () => replies.has(command.commandId));
      return replies.get(command.commandId)!;
    };
    const alice = { userId: "alice" };
    expect(await call(b.place("b1", "bid", "99", "1", alice))).toMatchObject({ code: 100 });
    expect(await call(b.place("b2", "bid", "98", "1", alice))).toMatchObject({ code: 100 });
    expect(await call(b.stopLimit("s1", "ask", "97", "96", "1", alice))).toMatchObject({
      code: 106,
      codeName: "stop-accepted",
      orderStatus: "stop-accepted",
    });
    expect(await call(b.amend("b1", { price: "99.5" }, "alice"))).toMatchObject({
      status: "accepted",
      code: 0,
      orderId: b.id("b1"),
      orderStatus: "rested",
      remainingVolume: "1",
    });
    expect(await call(b.place("a1", "ask", "99.5", "0.4", { userId: "bob" }))).toMatchObject({
      codeName: "filled",
    });
    // A trade at 100 triggers carol's buy stop, which buys from the same ask.
    expect(await call(b.place("a100", "ask", "100", "1", { userId: "bob" }))).toMatchObject({
      code: 100,
    });
    expect(await call(b.stopMarket("s2", "bid", "100", "0.2"))).toMatchObject({ code: 106 });
    expect(await call(b.place("t1", "bid", "100", "0.1", { userId: "dave" }))).toMatchObject({
      codeName: "filled",
      triggeredStops: 1,
    });
    expect(await call(b.cancelAll("alice"))).toMatchObject({
      status: "accepted",
      code: 0,
      cancelledOrders: 3,
      events: 3,
    });
    expect(await call(b.cancelAll("nobody", false))).toMatchObject({ code: 0, cancelledOrders: 0 });
    expect(await call(b.halt("maintenance"))).toMatchObject({ status: "accepted", code: 0 });
    expect(await call(b.place("late", "bid", "1", "1"))).toMatchObject({ code: 304 });
    expect(await call(b.resume("done"))).toMatchObject({ status: "accepted", code: 0 });

    const expected = await store.eventCount();
    await eventually(
      "every event published",
      () => events.length >= expected,
      30_000,
      () => `(${events.length} of ${expected})`,
    );
    // Each type on the exchange docs/orders.md names.
    for (const { exchange, event } of events) {
      expect({ type: event.type, exchange }).toEqual({
        type: event.type,
        exchange: eventExchanges[event.type as keyof typeof eventExchanges],
      });
    }
    const byType = (type: string): Record<string, unknown>[] =>
      events
        .filter(({ event }) => event.type === type)
        .map(({ exchange, event }) => ({ exchange, ...event.payload }));
    expect(byType("order.stop-accepted.v1")).toMatchObject([
      {
        exchange: "messages:order:create",
        orderId: b.id("s1"),
        stopPrice: "97",
        type: "stop-limit",
      },
      { exchange: "messages:order:create", orderId: b.id("s2"), price: "0", type: "stop-market" },
    ]);
    expect(byType("order.amended.v1")).toMatchObject([
      {
        exchange: "messages:order:update",
        orderId: b.id("b1"),
        priorityKept: false,
        before: { price: "99" },
        after: { price: "99.5" },
      },
    ]);
    expect(byType("order.triggered.v1")).toMatchObject([
      { exchange: "messages:order:update", orderId: b.id("s2"), triggerPrice: "100" },
    ]);
    const cancelled = byType("order.cancelled.v1");
    expect(cancelled.map((c) => [c.orderId, c.reason, c.exchange])).toEqual([
      [b.id("b1"), "cancel-all", "messages:order:delete"],
      [b.id("b2"), "cancel-all", "messages:order:delete"],
      [b.id("s1"), "cancel-all", "messages:order:delete"],
    ]);
    expect(cancelled[0]).toMatchObject({ volume: "0.6" });
    expect(cancelled[2]).toMatchObject({ stopPrice: "97" });
    expect([...byType("pair.halted.v1"), ...byType("pair.resumed.v1")]).toEqual([
      { exchange: "messages:pair:update", pairId: b.pairId, reason: "maintenance" },
      { exchange: "messages:pair:update", pairId: b.pairId, reason: "done" },
    ]);
  } finally {
    await outbox.stop();
    await close();
    await rpc.close().catch(() => undefined);
    await removePartition(store, suite.publisher, partition);
  }
}, 90_000);
