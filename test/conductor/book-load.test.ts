/**
 * Loading a large book at boot: 100,000 resting orders written straight into Valkey in
 * the conductor's own encoding (through the commit script) are all loaded and served.
 * The load time is reported (and exposed as matching_book_load_seconds), never asserted:
 * performance targets live in benchmarks.
 */
import { expect, test } from "bun:test";
import { CommitBuilder, commitScript } from "../../src/conductor/commit-script";
import { ConductorStore } from "../../src/conductor/store";
import type { RestingOrder } from "../../src/domain/index";
import { uniquePartition } from "../support/stack";
import { conductorSuite, PartitionStore, removePartition, startConductor } from "./helpers";

const suite = conductorSuite();

test("100,000 resting orders load at boot (time reported)", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const writer = new ConductorStore(store.valkey, store.keys);
  const total = 100_000;
  try {
    await store.valkey.set(store.keys.ownerEpoch, "1");
    const started = performance.now();
    for (let start = 0; start < total; start += 2000) {
      const batch = new CommitBuilder(store.keys.ownerEpoch, 1);
      for (let i = start; i < start + 2000; i++)
        writer.stageRestingOrder(batch, restingOrder(partition, i));
      writer.stagePair(batch, partition);
      await store.valkey.eval(commitScript, batch.keys.length, ...batch.keys, ...batch.args);
    }
    const writeSeconds = (performance.now() - started) / 1000;
    expect(await store.bookSizes(partition)).toEqual({ bids: total / 2, asks: total / 2 });

    const bootStarted = performance.now();
    const conductor = await startConductor(suite.stack, partition);
    const bootSeconds = (performance.now() - bootStarted) / 1000;
    const loadSeconds = await conductor.metric("matching_book_load_seconds");
    expect(loadSeconds).toBeGreaterThan(0);
    const digest = (await (await fetch(`${conductor.url}/digest`)).json()) as {
      restingOrders: number;
    };
    expect(digest.restingOrders).toBe(total);
    expect(await conductor.metric("matching_resting_orders")).toBe(total);
    const book = (await (await fetch(`${conductor.url}/books/${partition}?depth=2`)).json()) as {
      bids: { price: string }[];
      asks: { price: string }[];
    };
    expect(book.bids.map((l) => l.price)).toEqual(["99.99", "99.98"]);
    expect(book.asks.map((l) => l.price)).toEqual(["100.01", "100.02"]);
    console.log(
      `book load: ${total} resting orders loaded in ${loadSeconds.toFixed(3)} s (matching_book_load_seconds); ` +
        `process start to ready ${bootSeconds.toFixed(2)} s; writing them took ${writeSeconds.toFixed(2)} s`,
    );
    expect(await conductor.stop()).toBe(0);
  } finally {
    await removePartition(store, suite.publisher, partition);
  }
}, 90_000);

/** Order i: bids on 50.00..99.99 and asks on 100.01..149.99, 10 orders per level, never crossed. */
function restingOrder(pairId: number, i: number): RestingOrder {
  const side = i % 2 === 0 ? "bid" : "ask";
  const level = Math.floor(i / 2) % 4999;
  const cents = side === "bid" ? 9999 - level : 10_001 + level;
  return {
    id: `load-${i}`,
    userId: `u${i % 1000}`,
    pairId,
    side,
    price: (cents / 100).toFixed(2),
    volume: "1.5",
    volumeTotal: "2",
    timestamp: 1_704_067_200_000 + i,
    sequence: i + 1,
    priceDecimals: 2,
    amountDecimals: 8,
    quoteDecimals: 8,
    stp: "none",
  };
}
