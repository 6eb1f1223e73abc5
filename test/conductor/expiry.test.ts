/**
 * Good-till-date orders and dead-man's switches through the real pipeline: an armed order
 * expires, and a switch fires, with no traffic at all (the conductor's own tick), never
 * early; a kill -9 or a standby's takeover with them armed, and no command after it, neither
 * fires one twice nor forgets one.
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

/** Per order id, how many order.cancelled.v1 with reason cancel-after; and the switches fired. */
async function switchEffects(store: PartitionStore) {
  const events = (await store.events()).map(({ event }) => event);
  const cancelled = new Map<string, number>();
  for (const event of events) {
    const payload = event.payload as { orderId?: string; reason?: string };
    if (event.type === "order.cancelled.v1" && payload.reason === "cancel-after") {
      cancelled.set(payload.orderId!, (cancelled.get(payload.orderId!) ?? 0) + 1);
    }
  }
  const fired = events.filter((e) => e.type === "session.triggered.v1").map((e) => e.payload);
  return { cancelled, fired };
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
      // No command follows: the restarted conductor nudges its own queue to claim it.
      conductor = await startConductor(suite.stack, partition);
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
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      expect(await store.valkey.zcard(store.keys.deadlines)).toBe(0);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);

  test("a dead-man's switch fires once with no traffic and cancels every order of its user", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      await suite.publisher.declare(partition);
      const conductor = await startConductor(suite.stack, partition);
      const b = new OrderCommands(partition);
      const armedAt = Date.now();
      const commands = [
        b.place("d1", "bid", "90", "1", { userId: "dms" }),
        b.place("d2", "ask", "110", "1", { userId: "dms", type: "stop-limit", stopPrice: "105" }),
        b.place("keep", "bid", "91", "1", { userId: "other" }),
        b.cancelAfter("dms", 1000),
      ];
      await suite.publisher.publish(partition, commands);
      await eventually(
        "the switch fired",
        async () => (await switchEffects(store)).fired.length === 1,
        15_000,
      );
      await Bun.sleep(300);
      const { cancelled, fired } = await switchEffects(store);
      expect(fired).toHaveLength(1);
      expect((fired[0] as { triggerAt: number }).triggerAt).toBeGreaterThanOrEqual(armedAt + 1000);
      expect([...cancelled]).toEqual([
        [b.id("d1"), 1],
        [b.id("d2"), 1],
      ]);
      expect(await store.bookSizes(partition)).toEqual({ bids: 1, asks: 0 });
      expect(await store.valkey.hlen(store.keys.cancelAfter)).toBe(0);
      expect(await store.valkey.hlen(store.keys.cancelAfterSweeps)).toBe(0);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);

  test("kill -9 between the ticks of a switch's sweep, no command after: it is finished, each order once", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      await suite.publisher.declare(partition);
      let conductor = await startConductor(suite.stack, partition);
      const b = new OrderCommands(partition);
      // 2,500 orders of one user: a tick cancels 1,000, so the sweep takes three ticks.
      const orders = Array.from({ length: 2500 }, (_, i) =>
        b.place(`s${i}`, "bid", String(10 + (i % 80)), "1", { userId: "big" }),
      );
      await suite.publisher.publish(partition, [...orders, b.cancelAfter("big", 1000)]);
      // The first tick of the sweep commits the sweep's record with its first 1,000 cancels;
      // the next comes at least 100 ms later: the kill lands between them.
      const deadline = Date.now() + 20_000;
      while ((await store.valkey.hlen(store.keys.cancelAfterSweeps)) === 0) {
        if (Date.now() > deadline) throw new Error("the sweep never began");
        await Bun.sleep(2);
      }
      await conductor.kill9();
      expect(await store.valkey.hlen(store.keys.cancelAfterSweeps)).toBe(1);
      expect((await switchEffects(store)).cancelled.size).toBeLessThan(2500);
      // No command follows: the restarted conductor sees the work left over as due.
      conductor = await startConductor(suite.stack, partition);
      await eventually(
        "every order cancelled",
        async () => (await switchEffects(store)).cancelled.size >= 2500,
        20_000,
      );
      await Bun.sleep(300);
      const { cancelled, fired } = await switchEffects(store);
      expect(fired).toHaveLength(1);
      expect(new Set(cancelled.values())).toEqual(new Set([1]));
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
      expect(await store.valkey.hlen(store.keys.cancelAfterSweeps)).toBe(0);
      // The work-left-over marker went with the last of the work.
      expect(await store.valkey.zcard(store.keys.deadlines)).toBe(0);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);

  test("a standby takes over with orders and a switch armed: each fires once, none is forgotten", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    try {
      await suite.publisher.declare(partition);
      const active = await startConductor(suite.stack, partition);
      const b = new OrderCommands(partition);
      // The active one owns the partition once it took a command; then the standby starts.
      await suite.publisher.publish(partition, [b.place("first", "ask", "999", "1")]);
      await eventually("the first command stored", async () => (await store.eventCount()) > 0);
      const standby = await startConductor(suite.stack, partition);
      const start = Date.now();
      const gtd = Array.from({ length: 20 }, (_, i) =>
        b.place(`g${i}`, "bid", String(50 + i), "1", {
          timeInForce: "gtd",
          expireAt: start + 2500 + 10 * i,
        }),
      );
      const dms = Array.from({ length: 5 }, (_, i) =>
        b.place(`d${i}`, "ask", String(200 + i), "1", { userId: "dms" }),
      );
      await suite.publisher.publish(partition, [...gtd, ...dms, b.cancelAfter("dms", 2000)]);
      const ids = [...gtd, ...dms].map((c) => c.commandId);
      await eventually(
        "all placed",
        async () => (await store.storedResults(ids)).size === ids.length,
        15_000,
      );
      await active.kill9();
      // Killed before any deadline: whatever fires, the standby fired.
      expect(Date.now()).toBeLessThan(start + 2000);
      expect(await expiries(store)).toEqual([]);
      // No command follows: the standby, now the queue's active consumer, nudges it to claim.
      await eventually(
        "every order expired",
        async () => (await expiries(store)).length >= 20,
        15_000,
      );
      await eventually(
        "the switch fired",
        async () => (await switchEffects(store)).cancelled.size >= 5,
        15_000,
      );
      await Bun.sleep(300);
      const all = await expiries(store);
      expect(all.map((e) => e.orderId).sort()).toEqual(gtd.map((_, i) => b.id(`g${i}`)).sort());
      const { cancelled, fired } = await switchEffects(store);
      expect(fired).toHaveLength(1);
      expect([...cancelled.values()]).toEqual([1, 1, 1, 1, 1]);
      expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 1 });
      expect(await store.valkey.zcard(store.keys.deadlines)).toBe(0);
      expect(await standby.stop()).toBe(0);
    } finally {
      await removePartition(store, suite.publisher, partition);
    }
  }, 90_000);
});
