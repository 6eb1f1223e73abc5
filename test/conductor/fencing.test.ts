/**
 * All-or-nothing commits and ownership: the fenced commit script refuses a stale epoch
 * and a bad op before writing anything; a zombie conductor whose epoch was taken over
 * writes nothing, acknowledges nothing and exits 4; two conductors on one partition
 * never both apply commands; a keyspace deleted under a running conductor is reclaimed, and
 * one lost with its fencing counter (the datastore lost its data) is counted and reported.
 */
import { describe, expect, test } from "bun:test";
import { createWorkload } from "../../bench/workloads";
import { CommitBuilder, commitScript, orderHashFields } from "../../src/conductor/commit-script";
import { uniquePartition } from "../support/stack";
import {
  conductorSuite,
  eventually,
  expectEventsOnce,
  PartitionStore,
  partitionCount,
  removePartition,
  startConductor,
} from "./helpers";

const suite = conductorSuite();

describe("the commit script", () => {
  async function run(store: PartitionStore, batch: CommitBuilder): Promise<unknown> {
    return store.valkey.eval(commitScript, batch.keys.length, ...batch.keys, ...batch.args);
  }

  test("applies every op for the owning epoch, and nothing on a stale epoch, bad op or truncation", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    const { keys } = store;
    try {
      await store.valkey.set(keys.ownerEpoch, "7");
      const stage = (epoch: number, builtOn = 0) => {
        const batch = new CommitBuilder(keys.ownerEpoch, epoch, keys.eventSequence, {
          key: keys.commitCount,
          builtOn,
        });
        batch.setWithTtl(keys.processedCommand("c1"), '{"ok":true}', 60);
        batch.replaceOrderHash(
          keys.order("o1"),
          orderHashFields.map((field) => `${field}-value`),
        );
        batch.zadd(keys.bookRates(partition, "bid"), "100", "0000000000000001:o1");
        batch.sadd(keys.pairs, String(partition));
        batch.xadd(keys.events, '{"type":"order.rested.v1"}');
        return batch;
      };
      const nothingWritten = async () => {
        expect(
          await store.valkey.exists(keys.processedCommand("c1"), keys.order("o1"), keys.pairs),
        ).toBe(0);
        expect(await store.eventCount()).toBe(0);
        expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      };

      await expect(run(store, stage(6))).rejects.toThrow("FENCED 6 7");
      await nothingWritten();

      const badOp = stage(7);
      badOp.args.push("Q", "2");
      await expect(run(store, badOp)).rejects.toThrow("BADOP Q");
      await nothingWritten();

      const truncated = stage(7);
      truncated.args.push("S", "2", "60");
      await expect(run(store, truncated)).rejects.toThrow("BADOP truncated");
      await nothingWritten();

      // A bad op after many good ones still writes none of them.
      const late = stage(7);
      for (let i = 0; i < 100; i++) late.xadd(keys.events, `{"n":${i}}`);
      late.args.push("BADOP");
      await expect(run(store, late)).rejects.toThrow("BADOP");
      await nothingWritten();

      // Built on a history this node does not hold (a commit count it lacks, or one past it).
      await expect(run(store, stage(7, 1))).rejects.toThrow("DIVERGED 1 0");
      await nothingWritten();

      expect(await run(store, stage(7))).toBe(5);
      expect(await store.valkey.get(keys.commitCount)).toBe("1");
      expect(await store.valkey.get(keys.processedCommand("c1"))).toBe('{"ok":true}');
      expect(await store.valkey.hget(keys.order("o1"), "price")).toBe("price-value");
      expect(await store.eventCount()).toBe(1);

      // No epoch key at all (keyspace deleted): refused, and the error says so ("false").
      await store.valkey.del(keys.ownerEpoch);
      await expect(run(store, stage(7))).rejects.toThrow("FENCED 7 false");
    } finally {
      await store.deleteAll();
      store.close();
    }
  });
});

describe("fencing", () => {
  test("a zombie with a stale epoch writes nothing, acks nothing and exits 4", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 21, partition, partitionCount });
      const a = await startConductor(suite.stack, partition);
      const first = workload.next(0);
      await suite.publisher.publish(partition, [first]);
      await eventually(
        "first command processed",
        async () => (await a.metric("matching_commands_processed_total")) === 1,
      );
      expect(await a.metric("matching_owner_epoch")).toBe(
        Number(await store.valkey.get(store.keys.ownerEpoch)),
      );

      // A second owner claims the partition, as a newly booted conductor would.
      await store.valkey.incr(store.keys.ownerEpoch);
      const second = workload.next(1);
      await suite.publisher.publish(partition, [second]);
      expect(await a.process.exited).toBe(4);
      expect(a.log()).toContain("ownership lost");
      expect(await store.eventCount()).toBe(1);
      expect(await store.valkey.exists(store.keys.processedCommand(second.commandId))).toBe(0);
      expect(await store.bookSizes(partition)).toEqual({ bids: 1, asks: 0 });
      // Not acknowledged: the command is back in the queue for the next owner.
      await eventually(
        "command requeued",
        async () => (await suite.publisher.messageCount(partition)) === 1,
      );

      const b = await startConductor(suite.stack, partition);
      await eventually(
        "next owner processed it",
        async () => (await b.metric("matching_commands_processed_total")) === 1,
      );
      expect(await store.eventCount()).toBe(1 + 3);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      expect(await b.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);

  test("two conductors on one partition: one consumer is active, no command applied twice", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 22, partition, partitionCount });
      const a = await startConductor(suite.stack, partition);
      const b = await startConductor(suite.stack, partition);
      const n = 200;
      const commands = Array.from({ length: n }, (_, i) => workload.next(i));
      await suite.publisher.publish(partition, commands);
      await eventually(
        "every command has a stored result",
        async () => (await store.storedResults(commands.map((c) => c.commandId))).size === n,
        20_000,
      );
      // A stored result exists once committed; the counter moves after the durability wait.
      const processed = async (c: typeof a) =>
        c.process.exitCode === null ? await c.metric("matching_commands_processed_total") : 0;
      await eventually(
        "counters reach n",
        async () => (await processed(a)) + (await processed(b)) >= n,
      );
      const [pa, pb] = [await processed(a), await processed(b)];
      // Single active consumer: only one of them ever received commands, and the standby's
      // boot did not fence the active one (ownership is claimed on the first delivery).
      expect(pa === 0 || pb === 0).toBe(true);
      expect(pa + pb).toBe(n);
      expect(a.process.exitCode).toBeNull();
      expect(b.process.exitCode).toBeNull();
      expect(await store.eventCount()).toBe(2 * n);
      await expectEventsOnce(store, commands);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      console.log(
        `two conductors: A exit ${a.process.exitCode ?? "running"} processed ${pa}; B exit ${b.process.exitCode ?? "running"} processed ${pb}`,
      );
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);

  test("a graceful stop hands the partition to the standby in publish order", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 29, partition, partitionCount });
      const a = await startConductor(suite.stack, partition);
      const warm = workload.next(0);
      await suite.publisher.publish(partition, [warm]);
      // A is the active consumer once it has processed something; B then waits as standby.
      await eventually(
        "A active",
        async () => (await a.metric("matching_commands_processed_total")) === 1,
      );
      const b = await startConductor(suite.stack, partition);
      const n = 8000;
      const commands = [warm, ...Array.from({ length: n - 1 }, (_, i) => workload.next(i + 1))];
      await suite.publisher.publish(partition, commands.slice(1));
      // Stopped mid-stream, with a prefetch window of deliveries taken but not processed.
      await eventually(
        "A busy",
        async () => (await a.metric("matching_commands_processed_total")) > 500,
      );
      expect(await a.stop()).toBe(0);
      await eventually(
        "every command committed",
        async () => (await store.eventCount()) === 2 * n,
        30_000,
      );
      // B took over part of the stream: A's stop came while commands were left.
      expect(await b.metric("matching_commands_processed_total")).toBeGreaterThan(0);
      // Each command's events in the stream follow the publish order: a standby that got
      // commands behind A's window before A's requeue would have matched them first.
      const order: string[] = [];
      for (const { event } of await store.events()) {
        const id = String(event.commandId);
        if (order[order.length - 1] !== id) order.push(id);
      }
      expect(order.length).toBe(n);
      const firstOutOfOrder = order.findIndex((id, i) => id !== commands[i]!.commandId);
      expect(firstOutOfOrder).toBe(-1);
      await expectEventsOnce(store, commands);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      expect(await b.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);

  test("keyspace deleted while running: the conductor reclaims, reloads and carries on", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 23, partition, partitionCount });
      const conductor = await startConductor(suite.stack, partition);
      // An odd count leaves one bid resting, so the reload has something to forget.
      const before = Array.from({ length: 51 }, (_, i) => workload.next(i));
      await suite.publisher.publish(partition, before);
      await eventually(
        "first commands processed",
        async () => (await conductor.metric("matching_commands_processed_total")) === 51,
      );
      expect(await store.bookSizes(partition)).toEqual({ bids: 1, asks: 0 });
      const epochBefore = Number(await store.valkey.get(store.keys.ownerEpoch));

      expect(await store.deleteAll()).toBeGreaterThan(0);
      expect(await store.valkey.exists(store.keys.ownerEpoch)).toBe(0);

      // Fresh order ids (a new seed) so that the deleted markers play no part.
      const fresh = createWorkload("alternating", { seed: 24, partition, partitionCount });
      const after = Array.from({ length: 100 }, (_, i) => fresh.next(i));
      await suite.publisher.publish(partition, after);
      await eventually(
        "commands after the reset processed",
        async () => (await conductor.metric("matching_commands_processed_total")) === 151,
        20_000,
        async () => JSON.stringify(await conductor.metrics()),
      );
      expect(conductor.process.exitCode).toBeNull();
      // A reset the contract allows is no failure: harnesses fail a run when that counter moves.
      expect(await conductor.metric("matching_command_failures_total")).toBe(0);
      expect(await conductor.metric("matching_keyspace_resets_total")).toBeGreaterThanOrEqual(1);
      expect((await fetch(`${conductor.url}/readyz`)).status).toBe(200);
      expect(await store.eventCount()).toBe(200);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      // Never an epoch issued before the reset: a stale owner's commit could match it.
      expect(epochBefore).toBeGreaterThanOrEqual(1);
      expect(Number(await store.valkey.get(store.keys.ownerEpoch))).toBeGreaterThan(epochBefore);
      const digest = (await (await fetch(`${conductor.url}/digest`)).json()) as {
        restingOrders: number;
      };
      expect(digest.restingOrders).toBe(0);
      expect((await fetch(`${conductor.url}/metrics`)).status).toBe(200);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);

  test("keys lost with the fencing counter: counted, on /readyz, epochs never issued again", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const workload = createWorkload("alternating", { seed: 25, partition, partitionCount });
      const conductor = await startConductor(suite.stack, partition);
      await suite.publisher.publish(
        partition,
        Array.from({ length: 10 }, (_, i) => workload.next(i)),
      );
      await eventually(
        "first commands processed",
        async () => (await conductor.metric("matching_commands_processed_total")) === 10,
      );
      const epochBefore = Number(await store.valkey.get(store.keys.ownerEpoch));
      // What a flush or a promoted empty replica leaves: nothing of the partition, not even
      // the counter a harness's reset keeps.
      await store.deleteAll();
      await store.valkey.del(store.keys.ownerEpochCounter);

      const fresh = createWorkload("alternating", { seed: 26, partition, partitionCount });
      await suite.publisher.publish(
        partition,
        Array.from({ length: 10 }, (_, i) => fresh.next(i)),
      );
      await eventually(
        "commands after the loss processed",
        async () => (await conductor.metric("matching_commands_processed_total")) === 20,
        20_000,
      );
      expect(await conductor.metric("matching_datastore_keys_lost_total")).toBe(1);
      const readyz = await fetch(`${conductor.url}/readyz`);
      expect(readyz.status).toBe(503);
      expect(JSON.stringify(await readyz.json())).toContain("lost the partition's keys");
      expect(conductor.log()).toContain("the datastore lost the partition's keys");
      // The counter restarted from nothing, yet no epoch of before the loss is issued again.
      expect(Number(await store.valkey.get(store.keys.ownerEpoch))).toBeGreaterThan(epochBefore);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);
});
