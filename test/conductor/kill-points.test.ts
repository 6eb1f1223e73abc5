/**
 * The conductor killed on purpose at each named crash point (MATCHD_KILL_AT, see
 * src/infra/kill-point.ts) under a stream of commands, then restarted without it: every
 * command ends with exactly one stored result, no command's events are written twice, and the
 * books, events and results equal those of an uninterrupted run (the pure engine applying the
 * commands once, in order).
 */
import { expect, test } from "bun:test";
import { createWorkload } from "../../bench/workloads";
import type { CommandEnvelope } from "../../src/domain/index";
import { type KillPointName, parseKillAt } from "../../src/infra/kill-point";
import type { TestStack } from "../support/stack";
import { uniquePartition } from "../support/stack";
import {
  type ConductorProcess,
  commandIds,
  conductorSuite,
  eventually,
  expectEventsOnce,
  openPrivatePairRig,
  PartitionStore,
  type Publisher,
  partitionCount,
  referenceRun,
  removePartition,
  resultsDiffering,
  settledDigest,
  startConductor,
} from "./helpers";

const suite = conductorSuite();

test("MATCHD_KILL_AT is <point>:<N>; anything else is refused", () => {
  expect(parseKillAt("before-commit:3")).toEqual({ name: "before-commit", arrival: 3 });
  expect(parseKillAt("after-publish:1")).toEqual({ name: "after-publish", arrival: 1 });
  for (const bad of ["before-commit", "before-commit:0", "after-comit:2", "after-durable:-1", ":2"])
    expect(() => parseKillAt(bad)).toThrow("is not <point>:<N>");
});

function mixedCommands(partition: number, seed: number, count: number): CommandEnvelope[] {
  const workload = createWorkload("mixed", { seed, partition, partitionCount });
  return Array.from({ length: count }, (_, i) => workload.next(i));
}

/** Waits (bounded) for a conductor armed with a kill point to die by its own SIGKILL. */
async function killedAt(conductor: ConductorProcess, point: KillPointName, arrival: number) {
  const exited = await Promise.race([conductor.process.exited, Bun.sleep(20_000)]);
  if (exited === undefined) {
    await conductor.dispose();
    throw new Error(`the conductor did not reach ${point}:${arrival}:\n${conductor.log()}`);
  }
  expect(conductor.process.signalCode).toBe("SIGKILL");
  expect(conductor.log()).toContain(`kill point ${point}:${arrival} reached`);
  await conductor.dispose();
}

/**
 * Restarts the partition's conductor without a kill point and checks the end state against
 * the uninterrupted run. Returns the restarted conductor's duplicate count.
 */
async function restartAndCompare(
  stack: TestStack,
  datastoreUrl: string,
  publisher: Publisher,
  store: PartitionStore,
  partition: number,
  commands: readonly CommandEnvelope[],
): Promise<number> {
  const ids = commandIds(commands);
  const stored = (await store.storedResults(ids)).size;
  // Killed mid-run: the restart has work left.
  expect(stored).toBeLessThan(ids.length);
  const second = await startConductor(stack, partition, { datastoreUrl });
  const expected = referenceRun(commands);
  const digest = await settledDigest(second, store, publisher, partition, ids);
  expect(digest).toEqual({ digest: expected.digest, restingOrders: expected.resting });
  expect(await store.eventCount()).toBe(expected.events);
  await expectEventsOnce(store, commands);
  expect(await resultsDiffering(store, commands, expected)).toEqual([]);
  const duplicates = await second.metric("matching_commands_duplicate_total");
  expect(await second.stop()).toBe(0);
  expect(await publisher.messageCount(partition)).toBe(0);
  console.log(`stored at the kill ${stored} of ${ids.length}; duplicates after it ${duplicates}`);
  return duplicates;
}

/**
 * Under a stream of commands, in batches of at most 20 (so the armed arrival comes mid-run),
 * a conductor on the shared stack dies at `point`:`arrival`; a restart finishes the run.
 */
async function killAndRestart(point: KillPointName, arrival: number, seed: number) {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  try {
    const commands = mixedCommands(partition, seed, 600);
    await suite.publisher.declare(partition);
    const first = await startConductor(suite.stack, partition, {
      extraArgs: ["--batch-max", "20"],
      env: { MATCHD_KILL_AT: `${point}:${arrival}` },
    });
    await suite.publisher.publish(partition, commands);
    await killedAt(first, point, arrival);
    return await restartAndCompare(
      suite.stack,
      suite.stack.datastoreUrl,
      suite.publisher,
      store,
      partition,
      commands,
    );
  } finally {
    await removePartition(store, suite.publisher, partition);
  }
}

test("before-commit: a batch matched but never committed is redone once", async () => {
  await killAndRestart("before-commit", 4, 71);
}, 30_000);

test("after-commit: a batch committed, not yet durable, is answered from its stored results", async () => {
  const duplicates = await killAndRestart("after-commit", 4, 72);
  // The killed batch was committed and never acknowledged: its redelivery found its results.
  expect(duplicates).toBeGreaterThan(0);
}, 30_000);

test("after-durable: a durable batch never acknowledged is answered from its stored results", async () => {
  const duplicates = await killAndRestart("after-durable", 4, 73);
  expect(duplicates).toBeGreaterThan(0);
}, 30_000);

test("before-reload: killed between a failed batch and the reload, the restart applies it once", async () => {
  // A private primary + replica: pausing the replica makes batches fail their durability wait.
  const rig = await openPrivatePairRig("matchd-kill-before-reload-");
  const { partition, publisher } = rig;
  const datastoreUrl = rig.pair.primary.url;
  const store = new PartitionStore(datastoreUrl, partition);
  try {
    const commands = mixedCommands(partition, 74, 300);
    const ids = commandIds(commands);
    await publisher.declare(partition);
    const first = await startConductor(rig.stack, partition, {
      datastoreUrl,
      extraArgs: ["--batch-max", "20", "--durability-timeout-ms", "300"],
      env: { MATCHD_KILL_AT: "before-reload:2" },
    });
    await publisher.publish(partition, commands.slice(0, 100));
    await eventually(
      "the first 100 stored",
      async () => (await store.storedResults(ids.slice(0, 100))).size === 100,
    );
    rig.pauseReplica();
    await publisher.publish(partition, commands.slice(100));
    // The first failed batch is reloaded and retried, the second one's reload never comes.
    await killedAt(first, "before-reload", 2);
    expect(first.log().split("batch failed; requeued").length - 1).toBe(2);
    rig.resumeReplica();
    await restartAndCompare(rig.stack, datastoreUrl, publisher, store, partition, commands);
  } finally {
    store.close();
    await rig.close();
  }
}, 45_000);
