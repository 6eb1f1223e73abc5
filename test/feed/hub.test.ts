// The hub's limits without a server: the subscribe budget (a burst, then a steady rate) and
// the subscription count, each refused with a clear error; idle depth streams dropped; an
// event the feed cannot read refused before it changes a book; a client past its unsent bound
// cut off.

import { expect, test } from "bun:test";
import { BadEventError, FeedBook } from "../../src/feed/feed-book";
import { closeCodes, FeedHub, subscribeBudget } from "../../src/feed/hub";
import { idleStreamMs, PairStreams } from "../../src/feed/pair-streams";
import { PartitionFeed } from "../../src/feed/partition-feed";
import { TestSockets } from "./topics";

function hubWithClient(maxSubscriptions = 50) {
  const books = new Map<number, FeedBook>();
  const hub = new FeedHub(
    {
      book: (pairId) => {
        const book = books.get(pairId) ?? new FeedBook(pairId, 0);
        books.set(pairId, book);
        return book;
      },
      flush: () => undefined,
      forget: (pairId) => books.delete(pairId),
      notServed: () => "not served",
    },
    { clientBufferBytes: 1 << 20, maxSubscriptions, resumeMessages: 10 },
  );
  const received: Record<string, unknown>[] = [];
  const connection = hub.open(
    new TestSockets(hub).socket((text) =>
      received.push(JSON.parse(text) as Record<string, unknown>),
    ),
  );
  return { hub, connection, received };
}

test("a connection spends its subscribe budget: a burst, then a steady rate", () => {
  const { connection } = hubWithClient();
  const start = 1_000_000;
  let allowed = 0;
  for (let i = 0; i < 30; i++) if (connection.spendSubscribe(start)) allowed++;
  expect(allowed).toBe(subscribeBudget.burst);
  // A second later the rate's worth is back, never more than the burst.
  let later = 0;
  for (let i = 0; i < 30; i++) if (connection.spendSubscribe(start + 1000)) later++;
  expect(later).toBe(subscribeBudget.perSecond);
});

test("subscribes past the budget or the subscription limit are refused with a reason", () => {
  const { hub, connection, received } = hubWithClient(3);
  for (let pairId = 1; pairId <= 4; pairId++) {
    hub.receive(connection, JSON.stringify({ op: "subscribe", channel: "trades", pairId }));
  }
  const errors = received.filter((m) => m.type === "error").map((m) => m.error);
  expect(errors).toEqual(["at most 3 subscriptions a connection"]);
  for (let i = 0; i < subscribeBudget.burst; i++) {
    hub.receive(connection, JSON.stringify({ op: "subscribe", channel: "trades", pairId: 1 }));
  }
  expect(received.at(-1)).toEqual({
    type: "error",
    error: `too many subscribes: at most ${subscribeBudget.perSecond} a second after ${subscribeBudget.burst}`,
  });
});

test("a stream nobody reads is dropped after a while; one read is kept", () => {
  const book = new FeedBook(1, 0);
  const streams = new PairStreams(book, 10, () => undefined);
  streams.depth(25);
  streams.other("trades");
  streams.depth(10).subscribers.add({ send: () => true });
  streams.other("l3").subscribers.add({ send: () => true });
  const change = (seq: number) => {
    book.apply(
      {
        type: "order.rested.v1",
        pairId: 1,
        commandId: `c${seq}`,
        payload: { orderId: `o${seq}`, side: "bid", price: String(seq), volume: "1" },
      },
      seq,
    );
    return book.flush()!;
  };
  streams.publish(change(1), 0);
  streams.publish(change(2), idleStreamMs - 1);
  const kept = () => streams.streams().map((s) => `${s.channel}:${s.depth}`);
  expect(kept()).toEqual(["book:25", "book:10", "trades:all", "l3:all"]);
  streams.publish(change(3), idleStreamMs + 1);
  expect(kept()).toEqual(["book:10", "l3:all"]);
  // Asked for again, a dropped stream starts from the book as it is now.
  expect(streams.other("trades").lastSeq).toBe(3);
});

test("an event whose payload the feed cannot read is refused, not half-applied", () => {
  const book = new FeedBook(1, 0);
  const bad = {
    type: "order.rested.v1",
    pairId: 1,
    commandId: "c1",
    payload: { orderId: "o1", side: "bid", volume: "1" },
  };
  expect(() => book.apply(bad, 1)).toThrow(BadEventError);
  expect(book.bids.size).toBe(0);
  expect(book.flush()).toBeUndefined();
});

/** A hub over a real partition feed (one partition), loaded from an empty snapshot. */
function hubOverFeed() {
  const feed = new PartitionFeed({
    partition: 0,
    partitionCount: 1,
    publish: (set) => hub.publish(set),
  });
  const hub: FeedHub = new FeedHub(
    {
      book: (pairId, keep) => feed.book(pairId, keep),
      forget: (pairId) => feed.forget(pairId),
      flush: () => feed.flush(),
      notServed: () => "not served",
    },
    { clientBufferBytes: 1 << 20, maxSubscriptions: 50, resumeMessages: 10 },
  );
  feed.load({ seq: 0, pairs: [], halted: new Map() });
  const sockets = new TestSockets(hub);
  const open = () => hub.open(sockets.socket(() => undefined));
  return { feed, hub, open };
}

const subscribe = (pairId: number) => JSON.stringify({ op: "subscribe", channel: "book", pairId });

test("snapshots and subscriptions of pairs nothing reached leave nothing behind", () => {
  const { feed, hub, open } = hubOverFeed();
  for (let pairId = 1; pairId <= 1000; pairId++) {
    expect(hub.snapshot(pairId, "book", 10)).toMatchObject({ pairId, bids: [], asks: [] });
  }
  expect(feed.pairIds()).toEqual([]);
  const leaving = open();
  hub.receive(leaving, subscribe(7));
  hub.receive(leaving, JSON.stringify({ op: "unsubscribe", channel: "book", pairId: 7 }));
  const closing = open();
  hub.receive(closing, subscribe(8));
  expect(feed.pairIds()).toEqual([8]);
  hub.closed(closing);
  expect(feed.pairIds()).toEqual([]);
});

test("a pair an event reached keeps its book after its last subscriber leaves", () => {
  const { feed, hub, open } = hubOverFeed();
  const connection = open();
  hub.receive(connection, subscribe(9));
  const payload = { orderId: "o-1", side: "bid", price: "10", volume: "1" };
  feed.receive({ type: "order.rested.v1", pairId: 9, commandId: "c-1", payload }, "1");
  feed.flush();
  hub.closed(connection);
  expect(feed.pairIds()).toEqual([9]);
  expect(hub.snapshot(9, "book", 10)).toMatchObject({
    seq: 1,
    bids: [{ price: "10", volume: "1", orders: 1 }],
  });
});

test("a client past its unsent bound is cut off with a reason; one within it is kept", () => {
  const { hub } = hubOverFeed();
  const closes: string[] = [];
  const socketWith = (unsent: number) => ({
    ...new TestSockets(hub).socket(() => undefined),
    bufferedAmount: () => unsent,
    close: (code: number, reason: string) => closes.push(`${unsent}: ${code} ${reason}`),
  });
  const slow = hub.open(socketWith((1 << 20) + 1));
  const keeping = hub.open(socketWith(1 << 20));
  hub.cutSlowClients();
  expect(closes).toEqual([
    `${(1 << 20) + 1}: ${closeCodes.slowConsumer} slow consumer: ${(1 << 20) + 1} bytes unsent`,
  ]);
  expect([slow.closed, keeping.closed]).toEqual([true, false]);
  expect(hub.counters.slowClientsCut).toBe(1);
});
