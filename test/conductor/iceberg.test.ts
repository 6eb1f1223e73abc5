/**
 * Iceberg orders through the real pipeline: the stored order keeps its shown and hidden
 * parts, the book answer shows only what it shows, and after kill -9 a restarted conductor
 * reloads it whole: same digest as the pure engine, and the next taker reaches the hidden part.
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

describe("iceberg orders in the conductor", () => {
  test("kept whole in Valkey, shown in part, reloaded whole after kill -9", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      await suite.publisher.declare(partition);
      let conductor = await startConductor(suite.stack, partition);
      const b = new OrderCommands(partition);
      const first = [
        b.place("ice", "ask", "100", "10", { displayVolume: "3" }),
        b.place("t1", "bid", "100", "4", { userId: "taker" }),
      ];
      await suite.publisher.publish(partition, first);
      const ids = first.map((c) => c.commandId);
      await settledDigest(conductor, store, suite.publisher, partition, ids);
      expect(
        await store.valkey.hmget(
          store.keys.order(b.id("ice")),
          "volume",
          "displayVolume",
          "hiddenVolume",
        ),
      ).toEqual(["2", "3", "4"]);
      const book = (await (await fetch(`${conductor.url}/books/${partition}`)).json()) as {
        asks: { price: string; volume: string }[];
      };
      expect(book.asks).toEqual([expect.objectContaining({ price: "100", volume: "2" })]);
      await conductor.kill9();
      conductor = await startConductor(suite.stack, partition);
      const second = [b.place("t2", "bid", "100", "6", { userId: "taker" })];
      await suite.publisher.publish(partition, second);
      const all = [...first, ...second];
      const after = await settledDigest(
        conductor,
        store,
        suite.publisher,
        partition,
        all.map((c) => c.commandId),
      );
      const expected = referenceRun(all);
      expect(after).toEqual({ digest: expected.digest, restingOrders: 0 });
      expect(await store.eventCount()).toBe(expected.events);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);
});
