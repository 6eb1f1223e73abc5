/**
 * A broken matching invariant halts the partition instead of looping: a conductor whose engine
 * is made to break on one command (MATCHD_TEST_BREAK_INVARIANT_ON) names the command in an
 * error line, reports the halt on /readyz and /metrics, stops consuming and exits with 7. The
 * batches before the broken one are acknowledged and replied; the broken batch and everything
 * after it are still in the queue, with nothing of them stored. A conductor with a sound engine
 * then finishes every command once, as an uninterrupted run would.
 */
import { expect, test } from "bun:test";
import { createWorkload } from "../../bench/workloads";
import type { CommandEnvelope } from "../../src/domain/index";
import { uniquePartition } from "../support/stack";
import {
  commandIds,
  conductorSuite,
  eventually,
  expectEventsOnce,
  openReplies,
  PartitionStore,
  partitionCount,
  referenceRun,
  removePartition,
  resultsDiffering,
  settledDigest,
  startConductor,
} from "./helpers";

const suite = conductorSuite();

test("the engine breaks an invariant on one command: the partition halts, exit 7, nothing of its batch committed or acknowledged", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const rpc = await openReplies(suite.publisher.channelModel());
  try {
    const workload = createWorkload("mixed", { seed: 61, partition, partitionCount });
    const commands = Array.from({ length: 80 }, (_, i) => workload.next(i));
    const ids = commandIds(commands);
    const poison = commands[50]!;
    const send = (list: readonly CommandEnvelope[]) =>
      Promise.all(
        list.map((c) =>
          suite.publisher.publish(partition, [c], {
            replyTo: rpc.queue,
            correlationId: c.commandId,
          }),
        ),
      );
    await suite.publisher.declare(partition);
    const conductor = await startConductor(suite.stack, partition, {
      env: { MATCHD_TEST_BREAK_INVARIANT_ON: poison.commandId },
    });
    await send(commands.slice(0, 30));
    await eventually("the first 30 replied", () => rpc.replies.size === 30);
    await send(commands.slice(30));

    const haltLine = () =>
      conductor
        .log()
        .split("\n")
        .find((line) => line.includes("matching invariant broken"));
    await eventually("the halt logged", () => haltLine() !== undefined);
    // While it lingers before exiting: not ready, with the reason; the gauge; no consumer.
    const readyz = await fetch(`${conductor.url}/readyz`);
    expect(readyz.status).toBe(503);
    const { reasons } = (await readyz.json()) as { reasons: string[] };
    expect(reasons.join("\n")).toContain(
      `halted: a matching invariant broke on command ${poison.commandId}`,
    );
    expect(await conductor.metric("matching_partition_halted")).toBe(1);
    await eventually(
      "the partition's consumer gone",
      async () => (await suite.publisher.consumerCount(partition)) === 0,
      5000,
    );
    expect(await conductor.process.exited).toBe(7);

    const halt = JSON.parse(haltLine()!) as Record<string, unknown>;
    expect(halt).toMatchObject({ level: "error", commandId: poison.commandId });
    expect(String(halt.invariant)).toContain("MATCHD_TEST_BREAK_INVARIANT_ON");
    // Halted at once: never requeued, reloaded and retried.
    expect(conductor.log()).not.toContain("batch failed");
    const first = ids.indexOf(String(halt.batchFirstCommandId));
    const last = ids.indexOf(String(halt.batchLastCommandId));
    console.log(`broken batch: commands ${first}..${last}, the poison is 50`);
    expect(first).toBeGreaterThanOrEqual(30);
    expect(first).toBeLessThanOrEqual(50);
    expect(last).toBeGreaterThanOrEqual(50);
    expect(last - first + 1).toBe(Number(halt.batchCommands));

    // Exactly the commands of the earlier batches are stored, acknowledged and replied to.
    const before = ids.slice(0, first);
    const stored = await store.storedResults(ids);
    expect([...stored.keys()].sort()).toEqual([...before].sort());
    expect([...rpc.replies.keys()].sort()).toEqual([...before].sort());
    expect(await store.eventCount()).toBe(referenceRun(commands.slice(0, first)).events);
    // The broken batch and every command after it are back in the queue, unacknowledged.
    await eventually(
      "the unacknowledged back in the queue",
      async () => (await suite.publisher.messageCount(partition)) === ids.length - first,
      10_000,
      async () => `(queue ${await suite.publisher.messageCount(partition)})`,
    );

    // A fixed build: every command once, as the pure engine applies them in order.
    const second = await startConductor(suite.stack, partition);
    const expected = referenceRun(commands);
    const digest = await settledDigest(second, store, suite.publisher, partition, ids);
    expect(digest).toEqual({ digest: expected.digest, restingOrders: expected.resting });
    await expectEventsOnce(store, commands);
    expect(await resultsDiffering(store, commands, expected)).toEqual([]);
    expect(await second.stop()).toBe(0);
  } finally {
    await rpc.close();
    await removePartition(store, suite.publisher, partition);
  }
}, 60_000);

test("a batch the datastore refuses the same way every time halts the partition instead of looping", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  try {
    const workload = createWorkload("alternating", { seed: 62, partition, partitionCount });
    const commands = Array.from({ length: 4 }, (_, i) => workload.next(i));
    await suite.publisher.declare(partition);
    const conductor = await startConductor(suite.stack, partition);
    await suite.publisher.publish(partition, commands.slice(0, 2));
    await eventually(
      "the first two processed",
      async () => (await conductor.metric("matching_commands_processed_total")) === 2,
    );
    // The fault: the owner epoch becomes a hash, so every commit (and claim) gets WRONGTYPE
    // before it writes anything. Retried, it would fail the same way for ever.
    await store.valkey.del(store.keys.ownerEpoch);
    await store.valkey.hset(store.keys.ownerEpoch, "not", "an epoch");
    await suite.publisher.publish(partition, commands.slice(2));
    await eventually("the halt logged", () => conductor.log().includes("no retry can mend"));
    const readyz = await fetch(`${conductor.url}/readyz`);
    expect(readyz.status).toBe(503);
    const { reasons } = (await readyz.json()) as { reasons: string[] };
    expect(reasons.join("\n")).toContain("halted: a batch cannot commit");
    expect(reasons.join("\n")).toContain("WRONGTYPE");
    expect(await conductor.process.exited).toBe(7);
    // Halted at once: never requeued and retried; nothing of the refused batch stored.
    expect(conductor.log()).not.toContain("batch failed");
    const stored = await store.storedResults(commandIds(commands));
    expect(stored.size).toBe(2);
    await eventually(
      "the refused commands back in the queue",
      async () => (await suite.publisher.messageCount(partition)) === 2,
      10_000,
    );
  } finally {
    await removePartition(store, suite.publisher, partition);
  }
}, 60_000);
