/**
 * kill -9 under load, then restart: every command ends with exactly one stored result,
 * no command's events are written twice, and the books equal those of an uninterrupted
 * run of the same commands (the pure engine applying them once, in order).
 */
import { describe, expect, test } from "bun:test";
import { createWorkload } from "../../src/bench/workloads";
import type { CommandEnvelope } from "../../src/domain/index";
import { uniquePartition } from "../support/stack";
import {
  type ConductorProcess,
  conductorSuite,
  eventually,
  expectEventsOnce,
  PartitionStore,
  partitionCount,
  referenceRun as reference,
  removePartition,
  resultsDiffering,
  settledDigest,
  startConductor,
} from "./helpers";

const suite = conductorSuite();

/**
 * Publishes the commands, runs a conductor, SIGKILLs it once it has processed each threshold (per process) of
 * commands, starts the next one, and stops the last gracefully once every command has a
 * stored result. Returns the last conductor's digest.
 */
async function runWithCrashes(
  partition: number,
  commands: readonly CommandEnvelope[],
  killAfter: readonly number[],
  store: PartitionStore,
): Promise<{ digest: string; restingOrders: number }> {
  await suite.publisher.declare(partition);
  await suite.publisher.publish(partition, commands);
  const ids = commands.map((c) => c.commandId);
  // Small batches keep a conductor that is about to be killed busy long enough for the
  // kill to land mid-run, whatever the machine's speed; the last one runs with defaults.
  const crashing = { extraArgs: ["--batch-max", "20"] };
  let conductor: ConductorProcess = await startConductor(suite.stack, partition, crashing);
  for (const [index, threshold] of killAfter.entries()) {
    await eventually(
      `${threshold} commands processed before the kill`,
      async () => (await conductor.metric("matching_commands_processed_total")) >= threshold,
      30_000,
    );
    await conductor.kill9();
    const stored = (await store.storedResults(ids)).size;
    console.log(`kill -9 after ${threshold}+ processed: ${stored} of ${ids.length} stored`);
    expect(stored).toBeLessThan(ids.length);
    const last = index === killAfter.length - 1;
    conductor = await startConductor(suite.stack, partition, last ? {} : crashing);
  }
  const digest = await settledDigest(conductor, store, suite.publisher, partition, ids);
  expect(await conductor.stop()).toBe(0);
  expect(await suite.publisher.messageCount(partition)).toBe(0);
  return digest;
}

describe("kill -9 and restart", () => {
  test("alternating, 2,000 commands: each applied once, empty book", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 41, partition, partitionCount });
      const n = 2000;
      const commands = Array.from({ length: n }, (_, i) => workload.next(i));
      const expected = reference(commands);
      const after = await runWithCrashes(partition, commands, [600], store);
      expect(await store.eventCount()).toBe(2 * n);
      expect(expected.events).toBe(2 * n);
      await expectEventsOnce(store, commands);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      expect(after).toEqual({ digest: expected.digest, restingOrders: 0 });
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);

  test("mixed workload killed twice: same books, events and results as an uninterrupted run", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("mixed", { seed: 42, partition, partitionCount });
      const commands = [...workload.prefill()];
      for (let i = 0; i < 3000; i++) commands.push(workload.next(i));
      const expected = reference(commands);
      const after = await runWithCrashes(partition, commands, [4000, 3000], store);
      expect(after.digest).toBe(expected.digest);
      expect(after.restingOrders).toBe(expected.resting);
      expect(await store.eventCount()).toBe(expected.events);
      await expectEventsOnce(store, commands);
      expect(await resultsDiffering(store, commands, expected)).toEqual([]);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 120_000);
});

describe("graceful stop mid-run", () => {
  test("SIGTERM under load: exactly the committed commands are acknowledged, a restart finishes the rest once", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 43, partition, partitionCount });
      const n = 2000;
      const commands = Array.from({ length: n }, (_, i) => workload.next(i));
      const ids = commands.map((c) => c.commandId);
      await suite.publisher.declare(partition);
      await suite.publisher.publish(partition, commands);
      const first = await startConductor(suite.stack, partition, {
        extraArgs: ["--batch-max", "20"],
      });
      await eventually(
        "a part processed",
        async () => (await first.metric("matching_commands_processed_total")) >= 400,
        30_000,
      );
      expect(await first.stop()).toBe(0);
      // Unacknowledged deliveries went back to the queue when its channel closed: what is
      // left is exactly what has no stored result (nothing committed was left unacknowledged,
      // nothing acknowledged was left uncommitted).
      const stored = (await store.storedResults(ids)).size;
      expect(stored).toBeLessThan(n);
      await eventually(
        "the unacknowledged back in the queue",
        async () => (await suite.publisher.messageCount(partition)) === n - stored,
        10_000,
        async () => `(queue ${await suite.publisher.messageCount(partition)}, stored ${stored})`,
      );
      const second = await startConductor(suite.stack, partition);
      await eventually(
        "every command has a stored result",
        async () => (await store.storedResults(ids)).size === n,
        60_000,
      );
      await eventually(
        "queue drained",
        async () => (await suite.publisher.messageCount(partition)) === 0,
      );
      expect(await store.eventCount()).toBe(2 * n);
      await expectEventsOnce(store, commands);
      const digest = (await (await fetch(`${second.url}/digest`)).json()) as { digest: string };
      expect(digest.digest).toBe(reference(commands).digest);
      expect(await second.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);
});
