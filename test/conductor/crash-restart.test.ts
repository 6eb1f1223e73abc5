/**
 * kill -9 under load, then restart: every command ends with exactly one stored result,
 * no command's events are written twice, and the books equal those of an uninterrupted
 * run of the same commands (the pure engine applying them once, in order). Stops and halts
 * come back with the books: a reloaded stop still triggers, a reloaded halt still refuses.
 */
import { describe, expect, test } from "bun:test";
import { createWorkload } from "../../bench/workloads";
import { brokerUser } from "../../src/cli/client/rpc";
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
import { OrderCommands, scenario } from "./order-commands";

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
  /** Pair commands are published as the broker user the conductors list as an operator. */
  { operators = false }: { operators?: boolean } = {},
): Promise<{ digest: string; restingOrders: number }> {
  await suite.publisher.declare(partition);
  const user = brokerUser(suite.stack.brokerUrl);
  await suite.publisher.publish(partition, commands, operators ? { userId: user } : {});
  const ids = commands.map((c) => c.commandId);
  const env: Record<string, string> = operators ? { MATCHING_OPERATOR_USERS: user } : {};
  // Small batches keep a conductor that is about to be killed busy long enough for the
  // kill to land mid-run, whatever the machine's speed; the last one runs with defaults.
  const crashing = { extraArgs: ["--batch-max", "20"], env };
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
    conductor = await startConductor(suite.stack, partition, last ? { env } : crashing);
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

describe("kill -9 and restart with stops and halts", () => {
  test("stops, amends, cancel-alls and halts killed twice: same books, events and results as an uninterrupted run", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      const commands = scenario(new OrderCommands(partition), 44, 2500);
      const expected = reference(commands);
      const after = await runWithCrashes(partition, commands, [600, 500], store, {
        operators: true,
      });
      expect(after.digest).toBe(expected.digest);
      expect(after.restingOrders).toBe(expected.resting);
      expect(await store.eventCount()).toBe(expected.events);
      await expectEventsOnce(store, commands);
      expect(await resultsDiffering(store, commands, expected)).toEqual([]);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 120_000);

  test("stops and a halt survive kill -9: the reloaded stop triggers, the halted pair refuses", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    // Two pairs of the partition: one trades and triggers, the other is halted.
    const trading = new OrderCommands(partition);
    const halted = new OrderCommands(partition, partition + partitionCount, `${trading.tag}-h`);
    const user = brokerUser(suite.stack.brokerUrl);
    const env = { MATCHING_OPERATOR_USERS: user };
    try {
      const first = [
        trading.place("a101", "ask", "101", "1"),
        trading.place("a103", "ask", "103", "1"),
        trading.place("b99", "bid", "99", "1"),
        trading.stopLimit("s-buy", "bid", "101", "102", "0.5", { userId: "stopper" }),
        trading.stopMarket("s-sell", "ask", "98", "0.5"),
        halted.place("h-bid", "bid", "50", "1"),
        halted.halt("maintenance window"),
      ];
      await suite.publisher.declare(partition);
      await suite.publisher.publish(partition, first, { userId: user });
      const conductor = await startConductor(suite.stack, partition, { env });
      const ids = first.map((c) => c.commandId);
      const before = await settledDigest(conductor, store, suite.publisher, partition, ids);
      const firstResults = await store.storedResults(ids);
      expect(ids.map((id) => firstResults.get(id)?.codeName)).toEqual([
        "rested",
        "rested",
        "rested",
        "stop-accepted",
        "stop-accepted",
        "rested",
        "ok",
      ]);
      await conductor.kill9();

      const restarted = await startConductor(suite.stack, partition, { env });
      const digest = (await (await fetch(`${restarted.url}/digest`)).json()) as typeof before;
      expect(digest).toEqual(before);
      expect(restarted.log()).toContain('"stopOrders":2');
      const book = await (await fetch(`${restarted.url}/books/${trading.pairId}`)).json();
      expect(book).toMatchObject({
        halted: false,
        stops: [
          { side: "bid", stopPrice: "101", volume: "0.5", orders: 1 },
          { side: "ask", stopPrice: "98", volume: "0.5", orders: 1 },
        ],
      });
      expect(await (await fetch(`${restarted.url}/books/${halted.pairId}`)).json()).toMatchObject({
        halted: true,
        haltReason: "maintenance window",
        bids: [{ price: "50", volume: "1", orders: 1 }],
      });
      expect(
        await (await fetch(`${restarted.url}/orders/${trading.id("s-buy")}`)).json(),
      ).toMatchObject({
        kind: "stop",
        type: "stop-limit",
        stopPrice: "101",
        userId: "stopper",
      });

      // A trade at 101 triggers the reloaded buy stop, which takes the rest of the ask.
      const second = [
        trading.place("t1", "bid", "101", "0.25", { userId: "taker" }),
        halted.place("refused", "bid", "50", "1"),
        halted.amend("h-bid", { price: "51" }),
        halted.cancel("h-bid"),
      ];
      await suite.publisher.publish(partition, second);
      const all = [...first, ...second];
      const after = await settledDigest(
        restarted,
        store,
        suite.publisher,
        partition,
        all.map((c) => c.commandId),
      );
      const results = await store.storedResults(second.map((c) => c.commandId));
      expect(results.get(second[0]!.commandId)).toMatchObject({
        codeName: "filled",
        triggeredStops: 1,
      });
      expect(results.get(second[1]!.commandId)).toMatchObject({
        status: "rejected",
        codeName: "pair-halted",
        code: 304,
      });
      expect(results.get(second[2]!.commandId)).toMatchObject({ codeName: "pair-halted" });
      expect(results.get(second[3]!.commandId)).toMatchObject({
        status: "accepted",
        orderStatus: "cancelled",
      });
      const triggered = (await store.events()).filter(
        ({ event }) => event.type === "order.triggered.v1",
      );
      expect(triggered.map(({ event }) => (event.payload as { orderId: string }).orderId)).toEqual([
        trading.id("s-buy"),
      ]);
      expect(after).toEqual({
        digest: reference(all).digest,
        restingOrders: reference(all).resting,
      });
      await expectEventsOnce(store, all);
      expect(await restarted.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);
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
