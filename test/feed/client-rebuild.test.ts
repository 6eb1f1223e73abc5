// Differential test of what a client rebuilds from the feed's messages: generated command
// sequences (limits, markets, stops, amends, cancels, cancel-alls, halts) run through the
// engine, their events through the feed's books and hub; clients subscribed at depths 10 and
// "all", and to L3, some from the start and some joining midway (a snapshot, then updates),
// apply what they receive, and at every checkpoint each equals the engine's book.

import { describe, expect, test } from "bun:test";
import { createWorkload } from "../../bench/workloads";
import type { CommandEnvelope } from "../../src/domain/index";
import { MatchingEngine } from "../../src/domain/index";
import { bookChecksum } from "../../src/feed/checksum";
import { formatDecimal, parseDecimal } from "../../src/feed/decimal-text";
import { FeedBook } from "../../src/feed/feed-book";
import { FeedHub } from "../../src/feed/hub";
import type { LevelView, OrderView } from "../../src/feed/price-levels";
import { pairControl } from "../domain/helpers";
import { TestSockets } from "./topics";

type Message = Record<string, unknown>;

/** A client's copy, kept from messages only, as docs/marketdata.md says. */
class Copy {
  bids = new Map<string, LevelView>();
  asks = new Map<string, LevelView>();
  orders = new Map<string, { side: string; price: string; volume: string }>();
  seq: number | undefined;
  problems: string[] = [];

  /** A copy of a bounded depth checks every message's checksum; the others only at checkpoints. */
  constructor(
    readonly channel: "book" | "l3",
    private readonly everyMessage: boolean,
  ) {}

  lastChecksum: number | undefined;

  /** What a message the copy's socket receives does. */
  readonly take = (text: string) => this.receive(JSON.parse(text) as Message);

  levels(side: "bid" | "ask"): LevelView[] {
    if (this.channel === "book") {
      const levels = [...(side === "bid" ? this.bids : this.asks).values()];
      return levels.sort((a, b) => (side === "bid" ? -1 : 1) * (Number(a.price) - Number(b.price)));
    }
    // L3 aggregated: insertion order is queue order within a price.
    const byPrice = new Map<string, { volume: bigint; orders: number }>();
    for (const o of this.orders.values()) {
      if (o.side !== side) continue;
      const level = byPrice.get(o.price) ?? { volume: 0n, orders: 0 };
      level.volume += parseDecimal(o.volume);
      level.orders++;
      byPrice.set(o.price, level);
    }
    const out = [...byPrice].map(([price, l]) => ({
      price,
      volume: formatDecimal(l.volume),
      orders: l.orders,
    }));
    return out.sort((a, b) => (side === "bid" ? -1 : 1) * (Number(a.price) - Number(b.price)));
  }

  queue(side: "bid" | "ask"): string[] {
    const mine = [...this.orders].filter(([, o]) => o.side === side);
    const prices = [...new Set(mine.map(([, o]) => o.price))].sort(
      (a, b) => (side === "bid" ? -1 : 1) * (Number(a) - Number(b)),
    );
    return prices.flatMap((price) =>
      mine.filter(([, o]) => o.price === price).map(([id, o]) => `${id}@${price}:${o.volume}`),
    );
  }

  private receive(m: Message): void {
    if (m.type !== "snapshot" && m.type !== "update") return;
    if (m.type === "update" && m.prevSeq !== this.seq)
      this.problems.push(`chain ${m.prevSeq} after ${this.seq}`);
    if (this.channel === "book") this.applyBook(m);
    else this.applyL3(m);
    this.seq = m.seq as number;
    this.lastChecksum = m.checksum as number;
    if (this.everyMessage && bookChecksum(this.levels("bid"), this.levels("ask")) !== m.checksum) {
      this.problems.push(`checksum at ${m.seq}`);
    }
  }

  private applyBook(m: Message): void {
    if (m.type === "snapshot") {
      this.bids.clear();
      this.asks.clear();
    }
    for (const [side, list] of [
      [this.bids, m.bids],
      [this.asks, m.asks],
    ] as const) {
      for (const l of list as LevelView[]) {
        if (l.volume === "0") side.delete(l.price);
        else side.set(l.price, l);
      }
    }
  }

  private applyL3(m: Message): void {
    if (m.type === "snapshot") {
      this.orders.clear();
      for (const [side, list] of [
        ["bid", m.bids],
        ["ask", m.asks],
      ] as const) {
        for (const o of list as OrderView[])
          this.orders.set(o.orderId, { side, price: o.price, volume: o.volume });
      }
      return;
    }
    for (const c of m.orders as {
      action: string;
      orderId: string;
      side: string;
      price: string;
      volume: string;
    }[]) {
      if (c.action === "remove") this.orders.delete(c.orderId);
      else if (c.action === "add") {
        this.orders.delete(c.orderId);
        this.orders.set(c.orderId, { side: c.side, price: c.price, volume: c.volume });
      } else this.orders.get(c.orderId)!.volume = c.volume;
    }
  }
}

function run(name: string, seed: number, commands: number) {
  const workload = createWorkload(name, { seed, pairs: 3 });
  const engine = new MatchingEngine();
  const books = new Map<number, FeedBook>();
  let seq = 0;
  const bookOf = (pairId: number) => {
    const book = books.get(pairId) ?? new FeedBook(pairId, seq);
    books.set(pairId, book);
    return book;
  };
  const hub = new FeedHub(
    {
      book: bookOf,
      flush: () => undefined,
      forget: (pairId) => books.delete(pairId),
      notServed: () => "not served",
    },
    { clientBufferBytes: 1 << 30, maxSubscriptions: 50, resumeMessages: 100 },
  );
  const sockets = new TestSockets(hub);
  const pairId = workload.pairIds[0]!;
  const copies: { copy: Copy; depth: number | "all" }[] = [];
  const subscribe = (channel: "book" | "l3", depth: number | "all") => {
    const copy = new Copy(channel, channel === "book" && depth !== "all");
    hub.receive(
      hub.open(sockets.socket(copy.take)),
      JSON.stringify({
        op: "subscribe",
        channel,
        pairId,
        ...(channel === "book" ? { depth } : {}),
      }),
    );
    copies.push({ copy, depth });
  };
  subscribe("book", 10);
  subscribe("book", "all");
  subscribe("l3", "all");
  const all: CommandEnvelope[] = [...workload.prefill()];
  for (let i = 0; i < commands; i++) {
    all.push(workload.next(i));
    if (i % 400 === 200) all.push(pairControl("pair.halt", pairId));
    if (i % 400 === 230) all.push(pairControl("pair.resume", pairId));
  }
  let checked = 0;
  for (const [n, command] of all.entries()) {
    for (const event of engine.apply(command).events) bookOf(event.pairId).apply(event, ++seq);
    for (const book of books.values()) {
      const set = book.flush();
      if (set !== undefined) hub.publish(set);
    }
    // Clients joining midway start from a snapshot.
    if (n === Math.floor(all.length / 2)) {
      subscribe("book", 25);
      subscribe("l3", "all");
    }
    if (n % 53 !== 0 && n !== all.length - 1) continue;
    const depth = engine.depth(pairId, 1_000_000);
    for (const { copy, depth: d } of copies) {
      const limit = d === "all" ? undefined : d;
      expect(copy.problems).toEqual([]);
      const top = (side: "bid" | "ask") => copy.levels(side).slice(0, 10);
      if (copy.lastChecksum !== undefined)
        expect(bookChecksum(top("bid"), top("ask"))).toBe(copy.lastChecksum);
      expect(copy.levels("bid")).toEqual(depth.bids.slice(0, limit));
      expect(copy.levels("ask")).toEqual(depth.asks.slice(0, limit));
    }
    checked++;
  }
  return { checked, copies, books, pairId };
}

describe("a client's copy rebuilt from the feed's messages", () => {
  test.each([
    ["exchange", 11],
    ["exchange", 12],
    ["mixed", 13],
  ] as const)("%s workload, seed %d: equal to the engine at every checkpoint", (name, seed) => {
    const { checked, copies, books, pairId } = run(name, seed, 1500);
    expect(checked).toBeGreaterThan(150);
    // L3 copies hold the engine's queue order too, as the feed's own book does.
    const book = books.get(pairId)!;
    for (const { copy } of copies.filter((c) => c.copy.channel === "l3")) {
      for (const side of ["bid", "ask"] as const) {
        expect(copy.queue(side)).toEqual(
          book
            .side(side)
            .orders()
            .map((o) => `${o.orderId}@${o.price}:${o.volume}`),
        );
      }
    }
  });
});
