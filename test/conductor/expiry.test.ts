/**
 * Good-till-date orders through the real pipeline: an armed order expires with no traffic
 * at all (the conductor's own tick), never before its expireAt, and a kill -9 with orders
 * armed neither expires one twice nor forgets one.
 */
import { describe, expect, test } from "bun:test";
import { uniquePartition } from "../support/stack";
import {
  conductorSuite,
  eventually,
  PartitionStore,
  removePartition,
  startConductor,
} from "./helpers";
import { OrderCommands } from "./order-commands";

const suite = conductorSuite();

/** The order ids of the stream's order.expired.v1 events, each with the time of its tick. */
async function expiries(
  store: PartitionStore,
): Promise<{ orderId: string; tickMs: number; expireAt: number }[]> {
  return (await store.events())
    .filter(({ event }) => event.type === "order.expired.v1")
    .map(({ event }) => {
      const payload = event.payload as { orderId: string; expireAt: number };
      // The tick's command id is clock.tick:<partition>:<its time>.
      const tickMs = Number(String(event.commandId).split(":")[2]);
      return { orderId: payload.orderId, tickMs, expireAt: payload.expireAt };
    });
}

describe("good-till-date orders in the conductor", () => {
  test("an armed order expires with no traffic, once, not before its expireAt", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      await suite.publisher.declare(partition);
      const conductor = await startConductor(suite.stack, partition);
      const b = new OrderCommands(partition);
      const expireAt = Date.now() + 1500;
      const commands = [
        b.place("gtd", "bid", "99", "1", { timeInForce: "gtd", expireAt }),
        b.place("gtc", "bid", "98", "1"),
      ];
      await suite.publisher.publish(partition, commands);
      await eventually(
        "the gtd order expired",
        async () => (await expiries(store)).length === 1,
        15_000,
      );
      const [expired] = await expiries(store);
      expect(expired!.orderId).toBe(b.id("gtd"));
      expect(expired!.tickMs).toBeGreaterThanOrEqual(expireAt);
      expect(await store.bookSizes(partition)).toEqual({ bids: 1, asks: 0 });
      expect(await store.valkey.exists(store.keys.order(b.id("gtd")))).toBe(0);
      const clock = Number(await store.valkey.hget(store.keys.clock, "now"));
      expect(clock).toBeGreaterThanOrEqual(expireAt);
      // Nothing armed is left: the conductor stops ticking and commits nothing more.
      const events = await store.eventCount();
      await Bun.sleep(500);
      expect(await store.eventCount()).toBe(events);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);

  test("kill -9 with orders armed: each expires exactly once, none is forgotten", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      await suite.publisher.declare(partition);
      let conductor = await startConductor(suite.stack, partition);
      const b = new OrderCommands(partition);
      const start = Date.now();
      // Forty bids at distinct prices (nothing trades), due over the next four seconds.
      const commands = Array.from({ length: 40 }, (_, i) =>
        b.place(`g${i}`, "bid", String(50 + i), "1", {
          timeInForce: "gtd",
          expireAt: start + 1000 + 75 * i,
        }),
      );
      await suite.publisher.publish(partition, commands);
      await eventually("some expired", async () => (await expiries(store)).length >= 5, 15_000);
      await conductor.kill9();
      const before = (await expiries(store)).length;
      expect(before).toBeLessThan(40);
      await Bun.sleep(Math.max(0, start + 4500 - Date.now()));
      conductor = await startConductor(suite.stack, partition);
      // A restarted conductor owns the partition from the first command it takes.
      await suite.publisher.publish(partition, [b.place("wake", "ask", "1000", "1")]);
      await eventually(
        "every order expired",
        async () => (await expiries(store)).length >= 40,
        15_000,
      );
      const all = await expiries(store);
      expect(all.map((e) => e.orderId).sort()).toEqual(
        commands.map((_, i) => b.id(`g${i}`)).sort(),
      );
      for (const e of all) expect(e.tickMs).toBeGreaterThanOrEqual(e.expireAt);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 1 });
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);
});
