// Differential test of the feed's book: generated command sequences (limits, markets, stops,
// amends, cancels, cancel-alls, halts; clocked: expiries, switches, icebergs, one-cancels-other
// lists) run through the engine; their events rebuild the feed's
// books, and at every checkpoint each book (levels and queue order) equals the engine's, and
// the checksum equals one computed independently (Bun's CRC32) from the engine's depth.

import { describe, expect, test } from "bun:test";
import { createWorkload, DOMAIN_CLOCK } from "../../bench/workloads";
import type { CommandEnvelope, DepthLevel, MatchingEngine as Engine } from "../../src/domain/index";
import { MatchingEngine } from "../../src/domain/index";
import { bookChecksum, crc32 } from "../../src/feed/checksum";
import { type ChangeSet, FeedBook } from "../../src/feed/feed-book";
import { pairControl } from "../domain/helpers";

/** Kraken's rule written again from its page, over the engine's own depth. */
function independentChecksum(bids: DepthLevel[], asks: DepthLevel[]): number {
  const field = (t: string) => t.replace(".", "").replace(/^0+/, "");
  const text = [...asks.slice(0, 10), ...bids.slice(0, 10)]
    .map((l) => field(l.price) + field(l.volume))
    .join("");
  return Bun.hash.crc32(text);
}

/** The engine's resting orders of a pair, by side, in price then queue order. */
function engineQueue(engine: Engine, ids: Set<string>, pairId: number) {
  const out = { bid: [] as string[], ask: [] as string[] };
  const orders = [...ids].map((id) => engine.getOrder(id)).filter((o) => o?.pairId === pairId);
  for (const side of ["bid", "ask"] as const) {
    const mine = orders.filter((o) => o!.side === side);
    mine.sort((a, b) => {
      const byPrice = Number(a!.price) - Number(b!.price);
      if (byPrice !== 0) return side === "bid" ? -byPrice : byPrice;
      return a!.sequence - b!.sequence;
    });
    out[side] = mine.map((o) => `${o!.id}@${o!.price}:${o!.volume}`);
  }
  return out;
}

function run(workloadName: string, commands: number, seed: number, clocked = false) {
  // Clocked: gtd orders that expire, switches that fire, icebergs and one-cancels-other lists.
  const clock = clocked ? DOMAIN_CLOCK : undefined;
  const workload = createWorkload(workloadName, { seed, pairs: 3, clock });
  const engine = new MatchingEngine();
  const books = new Map<number, FeedBook>();
  const ids = new Set<string>();
  const sets: ChangeSet[] = [];
  let seq = 0;
  const kinds = new Set<string>();
  const all: CommandEnvelope[] = [...workload.prefill()];
  for (let i = 0; i < commands; i++) {
    if (i % 100 === 0 && workload.tick !== undefined) all.push(workload.tick(i));
    all.push(workload.next(i));
    // Halts and resumes between the trading: a halted pair refuses places, the feed shows it.
    if (i % 500 === 250) all.push(pairControl("pair.halt", workload.pairIds[0]));
    if (i % 500 === 300) all.push(pairControl("pair.resume", workload.pairIds[0]));
  }
  let checked = 0;
  for (const [n, command] of all.entries()) {
    if (command.type === "order.place") ids.add(command.payload.id);
    if (command.type === "order.place-oco") for (const leg of command.payload.legs) ids.add(leg.id);
    const outcome = engine.apply(command);
    for (const event of outcome.events) {
      const reason = (event.payload as { reason?: string }).reason;
      kinds.add(reason === undefined ? event.type : `${event.type} ${reason}`);
      if ((event.payload as { hiddenVolume?: string }).hiddenVolume !== undefined)
        kinds.add("iceberg");
      const book = books.get(event.pairId) ?? new FeedBook(event.pairId, 0);
      books.set(event.pairId, book);
      book.apply(event, ++seq);
    }
    for (const book of books.values()) {
      const set = book.flush();
      if (set !== undefined) sets.push(set);
    }
    if (n % 29 !== 0 && n !== all.length - 1) continue;
    // Orders neither resting nor waiting as stops are gone for good: dropped from the scan.
    for (const id of ids) if (!engine.getOrder(id) && !engine.getStopOrder(id)) ids.delete(id);
    for (const [pairId, book] of books) {
      const depth = engine.depth(pairId, 1_000_000);
      expect(book.bids.top()).toEqual(depth.bids);
      expect(book.asks.top()).toEqual(depth.asks);
      const queue = engineQueue(engine, ids, pairId);
      for (const side of ["bid", "ask"] as const) {
        expect(
          book
            .side(side)
            .orders()
            .map((o) => `${o.orderId}@${o.price}:${o.volume}`),
        ).toEqual(queue[side]);
      }
      expect(bookChecksum(book.bids.top(10), book.asks.top(10))).toBe(
        independentChecksum(depth.bids, depth.asks),
      );
      checked++;
    }
  }
  return { sets, checked, books, kinds };
}

describe("the feed's book against the engine's", () => {
  test.each([
    ["exchange", 1],
    ["exchange", 2],
    ["mixed", 3],
    ["multi-pair", 4],
    ["exchange-clocked", 6],
  ] as const)("%s workload, seed %d: equal at every checkpoint", (name, seed) => {
    const clocked = name === "exchange-clocked";
    const { checked, sets, kinds } = run(clocked ? "exchange" : name, 3000, seed, clocked);
    if (clocked) {
      for (const kind of [
        "order.expired.v1",
        "session.triggered.v1",
        "order.cancelled.v1 cancel-after",
        "order.cancelled.v1 oco",
        "iceberg",
      ]) {
        expect(kinds).toContain(kind);
      }
    }
    expect(checked).toBeGreaterThan(100);
    // Each pair's change sets chain: every prevSeq is the seq before it.
    const last = new Map<number, number>();
    for (const set of sets) {
      expect(set.prevSeq).toBe(last.get(set.pairId) ?? 0);
      expect(set.seq).toBeGreaterThan(set.prevSeq);
      last.set(set.pairId, set.seq);
    }
  });

  test("halts and trades reach the change sets", () => {
    const { sets } = run("exchange", 1000, 5);
    expect(sets.some((s) => s.halted === true)).toBe(true);
    expect(sets.some((s) => s.halted === false)).toBe(true);
    expect(sets.some((s) => s.trades.length > 0)).toBe(true);
    expect(sets.some((s) => s.orders.some((o) => o.action === "change"))).toBe(true);
  });
});

describe("the checksum", () => {
  test("CRC32 equals Bun's (zlib's) on assorted text", () => {
    for (const text of ["", "a", "452852100000", "123456789", "x".repeat(1000)]) {
      expect(crc32(text)).toBe(Bun.hash.crc32(text));
    }
  });

  test("Kraken's worked example: points and leading zeros removed, asks then bids", () => {
    // Kraken's v1 page: "0.05000" with volume "0.00000304" formats as "5000304".
    const level = (price: string, volume: string) => ({ price, volume, orders: 1 });
    expect(bookChecksum([], [level("0.05000", "0.00000304")])).toBe(crc32("5000304"));
    expect(bookChecksum([level("99.5", "2")], [level("100", "1.25")])).toBe(
      crc32("100125" + "9952"),
    );
  });
});
