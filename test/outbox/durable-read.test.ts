/**
 * Under aof-replicated the outbox publishes an event only once its stream entry is fsynced
 * on the primary and a replica (on a private primary + replica pair, so the shared stack is
 * untouched): with the replica paused nothing leaves and the wait times out and is retried;
 * once it resumes every event arrives once, in order.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Redis from "ioredis";
import { type RunningValkey, startValkey } from "../../src/stack/index";
import { waitForReplicatedAof } from "../../src/stack/valkey";
import { testStack, uniquePartition } from "../support/stack";
import { eventually, Inbox, metricNumber, startOutbox, writeEvents } from "./helpers";

const servers: RunningValkey[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop().catch(() => undefined);
});

test("entries not yet fsynced on the replica are not published until they are", async () => {
  const stack = await testStack();
  const dir = mkdtempSync(join(tmpdir(), "matchd-outbox-durable-"));
  const primary = await startValkey({ dir: join(dir, "primary"), appendonly: true });
  servers.push(primary);
  const replica = await startValkey({
    dir: join(dir, "replica"),
    appendonly: true,
    replicaOf: `127.0.0.1:${primary.port}`,
  });
  servers.push(replica);
  await waitForReplicatedAof(primary, replica, 20_000);

  const partition = uniquePartition();
  const valkey = new Redis(primary.url);
  const inbox = await Inbox.open(stack.brokerUrl, partition);
  const outbox = await startOutbox({ ...stack, datastoreUrl: primary.url }, partition, [], {
    MATCHING_DURABILITY: "aof-replicated",
    MATCHING_DURABILITY_TIMEOUT_MS: "300",
  });
  let paused = false;
  try {
    await writeEvents(valkey, partition, 0, 10);
    await inbox.waitFor(10, 15_000);

    // The replica stops acknowledging: what is written now is not durable.
    process.kill(replica.pid, "SIGSTOP");
    paused = true;
    await writeEvents(valkey, partition, 10, 30);
    // Long past a publish's usual latency (milliseconds), several waits time out meanwhile.
    await Bun.sleep(1500);
    expect(inbox.byId.size).toBe(10);
    await eventually(
      "a durability wait timed out",
      async () =>
        metricNumber(await outbox.metrics(), "matching_outbox_durability_timeouts_total") >= 1,
      15_000,
    );

    process.kill(replica.pid, "SIGCONT");
    paused = false;
    await inbox.waitFor(30, 30_000);
    expect(inbox.firstDeliveryOrderKept()).toBe(true);
    const metrics = await outbox.metrics();
    expect(metricNumber(metrics, "matching_outbox_dead_letter_total")).toBe(0);
    expect(await outbox.stop()).toBe(0);
  } finally {
    if (paused) process.kill(replica.pid, "SIGCONT");
    await outbox.kill9().catch(() => undefined);
    await inbox.close();
    valkey.disconnect();
  }
}, 90_000);
