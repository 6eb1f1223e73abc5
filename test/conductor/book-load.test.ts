/**
 * Loading a large book at boot: 100,000 resting orders written straight into Valkey in
 * the conductor's own encoding (through the commit script) are all loaded and served.
 * The load time is reported (and exposed as matching_book_load_seconds), never asserted:
 * performance targets live in benchmarks.
 */
import { expect, test } from "bun:test";
import { uniquePartition } from "../support/stack";
import {
  conductorSuite,
  PartitionStore,
  removePartition,
  startConductor,
  writeRestingBook,
} from "./helpers";

const suite = conductorSuite();

test("100,000 resting orders load at boot (time reported)", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const total = 100_000;
  try {
    const started = performance.now();
    await writeRestingBook(store, partition, total);
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
