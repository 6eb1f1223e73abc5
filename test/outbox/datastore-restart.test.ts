/**
 * The outbox against a Valkey primary restarted in the middle of a drain (a private primary +
 * replica with AOF, so the shared stack is left alone): the outbox reconnects, continues where
 * the stream says, and every event arrives, in order, none dead-lettered.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { partitionKeys } from "../../src/infra/valkey/keys";
import type { RunningValkey } from "../../src/stack/index";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { startValkeyPair, type ValkeyPair } from "../support/valkey-pair";
import {
  eventually,
  Inbox,
  metricNumber,
  type OutboxProcess,
  startOutbox,
  writeEvents,
} from "./helpers";

let stack: TestStack;
let pair: ValkeyPair;
let primary: RunningValkey;
beforeAll(async () => {
  stack = await testStack();
  pair = await startValkeyPair("matchd-datastore-restart-");
  primary = pair.primary;
}, stackStartTimeoutMs);
afterAll(async () => {
  await primary?.stop().catch(() => undefined);
  await pair?.replica.stop().catch(() => undefined);
}, 60_000);

test("the Valkey primary restarted mid-drain: the outbox reconnects and every event arrives in order, none dead-lettered", async () => {
  const partition = uniquePartition();
  const events = 25_000;
  const inbox = await Inbox.open(stack.brokerUrl, partition);
  let writer = new Redis(primary.url);
  let outbox: OutboxProcess | undefined;
  try {
    outbox = await startOutbox({ ...stack, datastoreUrl: primary.url }, partition);
    const child = outbox;
    await writeEvents(writer, partition, 0, 2000);
    await inbox.waitFor(2000, 15_000);
    await writeEvents(writer, partition, 2000, 22_000);
    writer.disconnect();
    // Stopped with the backlog being drained; appendfsync always kept every written entry.
    await primary.stop();
    await Bun.sleep(1000);
    primary = await pair.restartPrimary(primary.port);
    writer = new Redis(primary.url);
    await writeEvents(writer, partition, 22_000, events);
    await inbox.waitFor(events, 60_000);
    await eventually(
      "the stream drained",
      async () => (await writer.xlen(partitionKeys(partition).events)) === 0,
      30_000,
    );
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    const metrics = await child.metrics();
    expect(metricNumber(metrics, "matching_outbox_dead_letter_total")).toBe(0);
    expect(child.process.exitCode).toBeNull();
    console.log(
      `datastore restart mid-drain: ${inbox.deliveries.length} deliveries of ${events} events (${inbox.duplicates} republished)`,
    );
    expect(await child.stop()).toBe(0);
  } finally {
    if (outbox !== undefined && outbox.process.exitCode === null) await outbox.kill9();
    writer.disconnect();
    await inbox.close();
  }
}, 120_000);
