/**
 * One-cancels-other through the real pipeline: both legs and their link are stored; after
 * kill -9 a restarted conductor reloads them linked, and a fill of one leg cancels the other
 * in the same command; the books equal the pure engine's.
 */
import { describe, expect, test } from "bun:test";
import { uniquePartition } from "../support/stack";
import {
  conductorSuite,
  PartitionStore,
  referenceRun,
  removePartition,
  settledDigest,
  startConductor,
} from "./helpers";
import { OrderCommands } from "./order-commands";

const suite = conductorSuite();

describe("one-cancels-other in the conductor", () => {
  test("stored linked, reloaded linked after kill -9, one leg's fill cancels the other", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      await suite.publisher.declare(partition);
      let conductor = await startConductor(suite.stack, partition);
      const b = new OrderCommands(partition);
      const list = b.oco("bracket", [
        b.place("tp", "ask", "110", "1"),
        b.place("sl", "ask", "90", "1", { type: "stop-market", price: "0", stopPrice: "90" }),
      ]);
      await suite.publisher.publish(partition, [list]);
      await settledDigest(conductor, store, suite.publisher, partition, [list.commandId]);
      expect(await store.valkey.hget(store.keys.order(b.id("tp")), "linkedOrderId")).toBe(
        b.id("sl"),
      );
      expect(await store.valkey.hget(store.keys.stopOrder(b.id("sl")), "linkedOrderId")).toBe(
        b.id("tp"),
      );
      await conductor.kill9();
      conductor = await startConductor(suite.stack, partition);
      const taker = b.place("t", "bid", "110", "0.4", { userId: "taker" });
      await suite.publisher.publish(partition, [taker]);
      const all = [list, taker];
      const after = await settledDigest(
        conductor,
        store,
        suite.publisher,
        partition,
        all.map((c) => c.commandId),
      );
      const expected = referenceRun(all);
      expect(after).toEqual({ digest: expected.digest, restingOrders: 1 });
      const cancelled = (await store.events())
        .map(({ event }) => event)
        .filter((e) => e.type === "order.cancelled.v1")
        .map((e) => [e.commandId, (e.payload as { orderId: string; reason: string }).reason]);
      expect(cancelled).toEqual([[taker.commandId, "oco"]]);
      expect(await store.valkey.exists(store.keys.stopOrder(b.id("sl")))).toBe(0);
      expect(await store.valkey.hget(store.keys.order(b.id("tp")), "linkedOrderId")).toBe("");
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);
});
