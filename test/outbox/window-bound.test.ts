/**
 * The confirm window against a broker whose confirms come out of order or never, with a stub
 * publisher (the fault) over the real stream, lease and consumer group: one confirm that never
 * arrives must stop publishing at the window, not let confirmed events pile up behind it, and a
 * session that ends still owed confirms must not hand its channel to the next session.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { createLogger } from "../../src/infra/log";
import { MetricsRegistry } from "../../src/infra/metrics";
import { outboxConsumerGroup, partitionKeys } from "../../src/infra/valkey/keys";
import { DeliveryLoop } from "../../src/outbox/delivery";
import { PartitionLease } from "../../src/outbox/lease";
import { createOutboxMetrics } from "../../src/outbox/metrics";
import type { ConfirmOutcome, EventPublisher } from "../../src/outbox/publisher";
import { OutboxStream } from "../../src/outbox/stream-reader";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { deletePartitionKeys, eventually, writeEvents } from "./helpers";

let stack: TestStack;
const connections: Redis[] = [];
beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);
afterAll(() => {
  for (const connection of connections) connection.disconnect();
});

/**
 * A publisher that confirms every event at once except the first, whose confirm it holds
 * (with `holdFirst` false it confirms everything).
 */
function stubPublisher(holdFirst = true) {
  const published: string[] = [];
  let held: ((outcome: ConfirmOutcome) => void) | undefined;
  const state = { closed: false };
  const publisher = {
    failed: null,
    blockedReason: null,
    onFailure: () => undefined,
    drained: () => Promise.resolve(),
    close: async () => {
      state.closed = true;
    },
    publish(event: { entryId: string }, onConfirm: (outcome: ConfirmOutcome) => void): boolean {
      published.push(event.entryId);
      if (holdFirst && held === undefined) held = onConfirm;
      else queueMicrotask(() => onConfirm("ack"));
      return true;
    },
  };
  return {
    published,
    state,
    release: () => held?.("ack"),
    publisher: publisher as unknown as EventPublisher,
  };
}

/**
 * A delivery loop (window 10) over a fresh partition holding `events` entries, with its lease
 * and `openPublisher` for each session's channel; `stop()` ends it and deletes its keys.
 */
async function deliveryOver(
  events: number,
  openPublisher: () => Promise<EventPublisher>,
  { leaseTtlMs = 10_000, settleTimeoutMs }: { leaseTtlMs?: number; settleTimeoutMs?: number } = {},
) {
  const partition = uniquePartition();
  const [reader, writer, control] = [0, 1, 2].map(() => new Redis(stack.datastoreUrl)) as [
    Redis,
    Redis,
    Redis,
  ];
  connections.push(reader, writer, control);
  const keys = partitionKeys(partition);
  await writeEvents(writer, partition, 0, events);
  const log = createLogger("error");
  const lease = new PartitionLease({
    valkey: control,
    key: keys.outboxLease,
    ownerId: `window-test-${partition}`,
    ttlMs: leaseTtlMs,
    log,
    onChange: (held) => loop.leaseChanged(held),
  });
  const loop: DeliveryLoop = new DeliveryLoop({
    stream: new OutboxStream(reader, writer, keys, outboxConsumerGroup, `window-${partition}`),
    lease,
    metrics: createOutboxMetrics(new MetricsRegistry(), () => 0),
    log,
    openPublisher,
    window: 10,
    readCount: 50,
    claimIdleMs: 30_000,
    readBlockMs: 100,
    settleTimeoutMs,
  });
  lease.start();
  void loop.start();
  return {
    keys,
    control,
    streamLength: () => writer.xlen(keys.events),
    stop: async () => {
      await loop.stop();
      await lease.release();
      await deletePartitionKeys(writer, partition);
    },
  };
}

test("a confirm that never arrives stops publishing at the window; confirmed events do not pile up behind it", async () => {
  const stub = stubPublisher();
  const delivery = await deliveryOver(200, async () => stub.publisher);
  try {
    await eventually("the window filled", () => stub.published.length >= 10);
    await Bun.sleep(1000);
    // Nine confirmed behind the one that never came: nothing more goes out, nothing is acknowledged.
    expect(stub.published.length).toBe(10);
    expect(await delivery.streamLength()).toBe(200);
    stub.release();
    await eventually("the rest delivered", async () => (await delivery.streamLength()) === 0);
    expect(stub.published.length).toBe(200);
  } finally {
    await delivery.stop();
  }
}, 60_000);

test("a session that ends still owed a confirm closes its channel; the next session publishes on a new one", async () => {
  // The first channel never confirms the first event; every later channel confirms all.
  const stubs: ReturnType<typeof stubPublisher>[] = [];
  const openPublisher = async () => {
    const stub = stubPublisher(stubs.length === 0);
    stubs.push(stub);
    return stub.publisher;
  };
  const delivery = await deliveryOver(50, openPublisher, {
    leaseTtlMs: 1500,
    settleTimeoutMs: 300,
  });
  try {
    await eventually("the window filled", () => stubs[0]?.published.length === 10);
    // Someone else's lease now: this holder loses it at its next renewal, and its session ends
    // with the first confirm still owed; it takes the lease again once the key is gone.
    await delivery.control.set(delivery.keys.outboxLease, "someone-else", "PX", 1000);
    await eventually("all delivered", async () => (await delivery.streamLength()) === 0, 15_000);
    expect(stubs[0]!.state.closed).toBe(true);
    expect(stubs.length).toBe(2);
    // The new channel starts from the first unconfirmed entry: the one whose confirm was owed.
    expect(stubs[1]!.published[0]).toBe(stubs[0]!.published[0]!);
    expect(new Set(stubs[1]!.published).size).toBe(50);
  } finally {
    await delivery.stop();
  }
}, 60_000);
