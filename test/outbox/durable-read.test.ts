/**
 * Under aof-replicated the outbox publishes an event only once its stream entry is fsynced
 * on the primary and a replica (on a private primary + replica pair, so the shared stack is
 * untouched): with the replica paused nothing leaves and each wait times out and is retried
 * without growing the backoff; once it resumes every event arrives once, in order, and a
 * stop during a wait ends at once. Entries committed while a read waits are read meanwhile,
 * on the other reader. `appendfsync` changed away from `always` while it runs
 * publishes nothing until it is back.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { DurabilityTimeoutError } from "../../src/infra/valkey/durability";
import { outboxConsumerGroup, partitionKeys } from "../../src/infra/valkey/keys";
import { OutboxStream } from "../../src/outbox/stream-reader";
import type { RunningValkey } from "../../src/stack/index";
import { type TestStack, testStack, uniquePartition } from "../support/stack";
import { startValkeyPair } from "../support/valkey-pair";
import { commitEvents, eventually, Inbox, metricNumber, startOutbox, writeEvents } from "./helpers";

let stack: TestStack;
let primary: RunningValkey;
let replica: RunningValkey;
let valkey: Redis;
let paused = false;

beforeAll(async () => {
  stack = await testStack();
  ({ primary, replica } = await startValkeyPair("matchd-outbox-durable-"));
  valkey = new Redis(primary.url);
}, 60_000);

// A test cut short by its timeout must not leave the primary full for the next one.
afterEach(async () => {
  await valkey?.config("SET", "maxmemory", "0");
  // Likewise a test cut short with the primary on everysec.
  await valkey?.config("SET", "appendfsync", "always");
});

afterAll(async () => {
  if (paused) resume();
  valkey?.disconnect();
  await replica?.stop().catch(() => undefined);
  await primary?.stop().catch(() => undefined);
}, 60_000);

/** The replica stops acknowledging: what is written from now on is not durable. */
function pause(): void {
  process.kill(replica.pid, "SIGSTOP");
  paused = true;
}

function resume(): void {
  process.kill(replica.pid, "SIGCONT");
  paused = false;
}

function startOn(partition: number, timeoutMs: number) {
  return startOutbox({ ...stack, datastoreUrl: primary.url }, partition, [], {
    MATCHING_DURABILITY: "aof-replicated",
    MATCHING_DURABILITY_TIMEOUT_MS: String(timeoutMs),
  });
}

/** An inbox on the partition's events, then an outbox; the inbox closed if the outbox fails. */
async function startWithInbox(partition: number, timeoutMs: number) {
  const inbox = await Inbox.open(stack.brokerUrl, partition);
  // An outbox that fails to start must not leave the inbox bound to every exchange behind.
  const outbox = await startOn(partition, timeoutMs).catch(async (error: unknown) => {
    await inbox.close();
    throw error;
  });
  return { inbox, outbox };
}

async function stopBoth(outbox: { kill9(): Promise<unknown> }, inbox: Inbox): Promise<void> {
  await outbox.kill9().catch(() => undefined);
  await inbox.close();
}

/** A read of new entries and its durability wait, as the delivery loop does them. */
async function readDurably(stream: OutboxStream, count: number, blockMs: number) {
  const read = await stream.readNewOn(0, count, blockMs);
  await read.durable();
  return read;
}

test("entries not yet fsynced on the replica are not published until they are", async () => {
  const partition = uniquePartition();
  // Long enough for the boot check's probe on a slow disk; short against the pause.
  const { inbox, outbox } = await startWithInbox(partition, 1000);
  try {
    await writeEvents(valkey, partition, 0, 10);
    await inbox.waitFor(10, 15_000);

    // Warnings counted from here: on a slow disk a wait before the pause may time out too.
    const logBeforePause = outbox.stderr().length;
    pause();
    // More than two reads' worth (500 each): full reads and the read-ahead behind them wait too.
    await writeEvents(valkey, partition, 10, 1210);
    // Long past a publish's usual latency (milliseconds); several waits time out meanwhile.
    await Bun.sleep(2000);
    expect(inbox.byId.size).toBe(10);
    await eventually(
      "two durability waits timed out",
      async () =>
        metricNumber(await outbox.metrics(), "matching_outbox_durability_timeouts_total") >= 2,
      15_000,
    );
    // Each timed-out wait paced its own retry: no backoff on top of it; one warning for
    // the episode.
    expect(outbox.stderr()).not.toContain("retrying after backoff");
    const duringPause = outbox.stderr().slice(logBeforePause);
    expect(duringPause.split("outbox read not confirmed durable").length - 1).toBe(1);

    resume();
    await inbox.waitFor(1210, 15_000);
    expect(outbox.stderr()).toContain("outbox reads confirmed durable again");
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(metricNumber(await outbox.metrics(), "matching_outbox_dead_letter_total")).toBe(0);
    expect(await outbox.stop()).toBe(0);
  } finally {
    if (paused) resume();
    await stopBoth(outbox, inbox);
  }
}, 60_000);

test("entries committed while a read waits for its durability are read during the wait", async () => {
  const partition = uniquePartition();
  const events = partitionKeys(partition).events;
  const { inbox, outbox } = await startWithInbox(partition, 20_000);
  const pending = async () =>
    Number(((await valkey.call("XPENDING", events, outboxConsumerGroup)) as unknown[])[0]);
  try {
    await writeEvents(valkey, partition, 0, 10);
    await inbox.waitFor(10, 15_000);
    pause();
    await commitEvents(valkey, partition, 10, 20);
    await eventually("the first batch read", async () => (await pending()) === 10, 10_000);
    // The first batch cannot be durable while the replica is paused; the next read is already
    // out, on the other reader, and takes the second batch as it arrives. Only one read is
    // out at a time: a third batch waits for the first to be published.
    await commitEvents(valkey, partition, 20, 30);
    await eventually("the second batch read", async () => (await pending()) === 20, 10_000);
    await commitEvents(valkey, partition, 30, 40);
    await Bun.sleep(500);
    expect(await pending()).toBe(20);
    expect(inbox.byId.size).toBe(10);
    resume();
    await inbox.waitFor(40, 15_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(await outbox.stop()).toBe(0);
  } finally {
    if (paused) resume();
    await stopBoth(outbox, inbox);
  }
}, 60_000);

test("appendfsync changed to everysec under a running outbox: nothing published until it is always again", async () => {
  const partition = uniquePartition();
  const { inbox, outbox } = await startWithInbox(partition, 3000);
  try {
    await writeEvents(valkey, partition, 0, 10);
    await inbox.waitFor(10, 15_000);
    await valkey.call("CONFIG", "SET", "appendfsync", "everysec");
    await eventually(
      "readiness names the setting",
      async () =>
        (await (await fetch(`http://127.0.0.1:${outbox.port}/readyz`)).text()).includes(
          "appendfsync is everysec",
        ),
      15_000,
    );
    await writeEvents(valkey, partition, 10, 60);
    await eventually(
      "the outbox names the policy",
      () =>
        outbox
          .stderr()
          .includes("outbox publishes nothing while the durability policy does not hold"),
      15_000,
    );
    await Bun.sleep(1000);
    expect(inbox.byId.size).toBe(10);

    await valkey.call("CONFIG", "SET", "appendfsync", "always");
    await inbox.waitFor(60, 15_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(await outbox.stop()).toBe(0);
  } finally {
    await valkey.call("CONFIG", "SET", "appendfsync", "always").catch(() => undefined);
    await stopBoth(outbox, inbox);
  }
}, 60_000);

test("a stop while a read waits for durability ends the wait at once", async () => {
  const partition = uniquePartition();
  // A wait that would last a minute if nothing ended it.
  const outbox = await startOn(partition, 60_000);
  try {
    pause();
    await writeEvents(valkey, partition, 0, 5);
    // Read (pending for the outbox), so its durability wait has begun.
    await eventually(
      "the outbox read the entries",
      async () => {
        // NOGROUP until the outbox's first session created the group.
        const summary = (await valkey
          .call("XPENDING", partitionKeys(partition).events, outboxConsumerGroup)
          .catch(() => [0])) as [number];
        // A blocking read is served by the first entry written: it may hold only that one.
        return Number(summary[0]) >= 1;
      },
      15_000,
    );
    await Bun.sleep(200);
    const started = performance.now();
    expect(await outbox.stop()).toBe(0);
    expect(performance.now() - started).toBeLessThan(5_000);
  } finally {
    if (paused) resume();
    await outbox.kill9().catch(() => undefined);
  }
}, 60_000);

test("a datastore at maxmemory refuses new writes, and the outbox still drains what the stream holds", async () => {
  // Under maxmemory with noeviction (the default, and the only policy that never drops data)
  // Valkey refuses every write that may grow memory. The outbox is what frees memory, by
  // deleting delivered entries: were its reads or its session starts refused too, the
  // partition would stay stuck.
  const partition = uniquePartition();
  const { inbox, outbox } = await startWithInbox(partition, 500);
  let limited = false;
  try {
    await writeEvents(valkey, partition, 0, 10);
    await inbox.waitFor(10, 15_000);
    // Paused while the backlog is written and the limit set, so it reads the rest under it.
    const pid = outbox.process.pid;
    process.kill(pid, "SIGSTOP");
    try {
      // Twelve reads' worth (500 each): a read the datastore refused would end its session,
      // and each new session would wait a longer backoff.
      await writeEvents(valkey, partition, 10, 6010);
      await valkey.config("SET", "maxmemory", "1");
      limited = true;
      await expect(valkey.set(`matchd-oom-probe-${partition}`, "1")).rejects.toThrow("OOM");
      // With the replica paused too, its durability waits time out, so new sessions start
      // while the datastore is full.
      pause();
    } finally {
      process.kill(pid, "SIGCONT");
    }
    await eventually(
      "a durability wait timed out",
      async () =>
        metricNumber(await outbox.metrics(), "matching_outbox_durability_timeouts_total") >= 2,
      15_000,
    );
    resume();
    await inbox.waitFor(6010, 30_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    expect(outbox.stderr()).not.toContain("outbox session failed on a datastore call");
    await eventually(
      "the delivered entries deleted",
      async () => (await valkey.xlen(partitionKeys(partition).events)) === 0,
      10_000,
    );
    expect(await outbox.stop()).toBe(0);
  } finally {
    if (paused) resume();
    if (limited) await valkey.config("SET", "maxmemory", "0");
    await stopBoth(outbox, inbox);
  }
}, 60_000);

test("an outbox started at maxmemory boots, takes its lease, creates its group and drains, dead-lettering what it cannot decode", async () => {
  const partition = uniquePartition();
  const keys = partitionKeys(partition);
  const inbox = await Inbox.open(stack.brokerUrl, partition);
  let outbox: Awaited<ReturnType<typeof startOn>> | undefined;
  try {
    // Written before any outbox ran, so the stream has no consumer group yet.
    await writeEvents(valkey, partition, 0, 1000);
    await valkey.xadd(keys.events, "*", "event", "{not json");
    await writeEvents(valkey, partition, 1000, 2000);
    await valkey.config("SET", "maxmemory", "1");
    await expect(valkey.set(`matchd-oom-probe-${partition}`, "1")).rejects.toThrow("OOM");
    outbox = await startOn(partition, 2000);
    await inbox.waitFor(2000, 30_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    await eventually(
      "the stream emptied",
      async () => (await valkey.xlen(keys.events)) === 0,
      10_000,
    );
    expect(await valkey.xlen(keys.eventsDeadLetter)).toBe(1);
    expect(metricNumber(await outbox.metrics(), "matching_outbox_dead_letter_total")).toBe(1);
    expect(outbox.stderr()).not.toContain("outbox session failed on a datastore call");
    expect(await outbox.stop()).toBe(0);
  } finally {
    await valkey.config("SET", "maxmemory", "0");
    await outbox?.kill9().catch(() => undefined);
    await inbox.close();
  }
}, 60_000);

test("every kind of read waits: one that does not block, one that blocks, a re-read of pending entries", async () => {
  const partition = uniquePartition();
  const keys = partitionKeys(partition);
  const connections: Redis[] = [];
  // Each read runs on a fresh connection, so only its own write can give its wait anything
  // to cover (on a connection that wrote nothing, WAITAOF answers at once).
  // Reads that must time out wait 300 ms; reads that must succeed get 2 s, for a slow disk.
  const freshStream = (consumer: string, timeoutMs = 300) => {
    const reader = new Redis(primary.url);
    const writer = new Redis(primary.url);
    connections.push(reader, writer);
    return new OutboxStream(reader, writer, keys, outboxConsumerGroup, consumer, {
      timeoutMs,
      observeWaitMs: () => undefined,
    });
  };
  try {
    await freshStream("a").ensureGroup();
    // Durable entries: a read of them succeeds.
    await writeEvents(valkey, partition, 0, 3);
    expect((await readDurably(freshStream("a", 2_000), 10, 0)).entries).toHaveLength(3);

    // A read that does not wait for entries (the one that follows a full batch).
    pause();
    await writeEvents(valkey, partition, 3, 6);
    await expect(readDurably(freshStream("a"), 10, 0)).rejects.toBeInstanceOf(
      DurabilityTimeoutError,
    );
    resume();

    // A blocking read, served when an entry arrives.
    const blocking = freshStream("b");
    pause();
    const blocked = readDurably(blocking, 10, 2_000);
    await Bun.sleep(100);
    await writeEvents(valkey, partition, 6, 7);
    await expect(blocked).rejects.toBeInstanceOf(DurabilityTimeoutError);
    resume();

    // A re-read of pending entries, taken by an earlier read on another connection.
    pause();
    await writeEvents(valkey, partition, 7, 9);
    await expect(readDurably(freshStream("c"), 10, 0)).rejects.toBeInstanceOf(
      DurabilityTimeoutError,
    );
    await expect(freshStream("c").readOwnPending("0", 10)).rejects.toBeInstanceOf(
      DurabilityTimeoutError,
    );
    resume();
    expect((await freshStream("c", 2_000).readOwnPending("0", 10)).entries).toHaveLength(2);
  } finally {
    if (paused) resume();
    for (const connection of connections) connection.disconnect();
  }
}, 30_000);
