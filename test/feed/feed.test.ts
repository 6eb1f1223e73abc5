/**
 * The feed against the real stack: a conductor, an outbox and feeds on one partition. Clients
 * keep books from the feed's messages (every checksum checked, every prevSeq chained) and end
 * equal to the conductor's; a feed started later agrees with one that ran throughout; a client
 * resumes from a sequence number; bad requests get clear errors; a slow client is cut off.
 */

import { afterEach, describe, expect, test } from "bun:test";
import { maskedText, stalledSocket } from "../../bench/feed-clients";
import { createWorkload } from "../../bench/workloads";
import type { CommandEnvelope } from "../../src/domain/index";
import type { LevelView } from "../../src/feed/price-levels";
import {
  type ConductorProcess,
  conductorSuite,
  eventually,
  PartitionStore,
  partitionCount,
  startConductor,
} from "../conductor/helpers";
import { startOutbox, startTcpProxy } from "../outbox/helpers";
import { uniquePartition } from "../support/stack";
import { FeedClient, type FeedProcess, startFeed } from "./helpers";

const suite = conductorSuite();
const feeds: FeedProcess[] = [];
const clients: FeedClient[] = [];
const stops: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  for (const feed of feeds.splice(0)) await feed.dispose();
  for (const stop of stops.splice(0)) await stop();
});

interface Rig {
  partition: number;
  pairId: number;
  conductor: ConductorProcess;
  store: PartitionStore;
  next: (n: number) => CommandEnvelope[];
  sent: () => number;
}

async function rig(seed: number): Promise<Rig> {
  const partition = uniquePartition();
  const conductor = await startConductor(suite.stack, partition);
  const outbox = await startOutbox(suite.stack, partition);
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  stops.push(
    () => outbox.stop(),
    async () => store.valkey.disconnect(),
  );
  const workload = createWorkload("exchange", { seed, partition, partitionCount });
  let i = 0;
  let sent = 0;
  const prefill = workload.prefill();
  const next = (n: number) => {
    const commands = sent === 0 ? [...prefill] : [];
    for (let k = 0; k < n; k++) commands.push(workload.next(i++));
    sent += commands.length;
    return commands;
  };
  return { partition, pairId: workload.pairIds[0]!, conductor, store, next, sent: () => sent };
}

/** Publishes and waits until the conductor processed every command sent so far. */
async function publish(r: Rig, commands: CommandEnvelope[]): Promise<void> {
  await suite.publisher.publish(r.partition, commands);
  await eventually(
    "every command processed",
    async () => (await r.conductor.metric("matching_commands_processed_total")) === r.sent(),
    30_000,
  );
}

async function partitionSeq(r: Rig): Promise<number> {
  return Number((await r.store.valkey.get(r.store.keys.eventSequence)) ?? 0);
}

async function conductorBook(r: Rig): Promise<{ bids: LevelView[]; asks: LevelView[] }> {
  const response = await fetch(`${r.conductor.url}/books/${r.pairId}?depth=1000`);
  return (await response.json()) as { bids: LevelView[]; asks: LevelView[] };
}

/**
 * Waits until the feed applied every event committed so far, and returns the pair's seq then
 * (the sequence number of the last event that changed its book).
 */
async function feedCaughtUp(r: Rig, feed: FeedProcess, depth: number | "all"): Promise<number> {
  const seq = await partitionSeq(r);
  await eventually(
    "the feed applied every event",
    async () => (await feed.metric("matching_feed_sequence")) >= seq,
    30_000,
  );
  const rest = (await (
    await fetch(`${feed.url}/feed/books/${r.pairId}?depth=${depth}`)
  ).json()) as { seq: number };
  return rest.seq;
}

async function openClient(feed: FeedProcess): Promise<FeedClient> {
  const client = await FeedClient.open(feed.wsUrl);
  clients.push(client);
  return client;
}

describe("a client's book from the feed", () => {
  test("equals the conductor's after a workload, every checksum and chain intact", async () => {
    const r = await rig(3);
    await publish(r, r.next(300));
    const feed = await startFeed(suite.stack, r.partition);
    feeds.push(feed);
    const client = await openClient(feed);
    for (const depth of ["all", 10] as const) {
      client.send({ op: "subscribe", channel: "book", pairId: r.pairId, depth });
    }
    client.send({ op: "subscribe", channel: "trades", pairId: r.pairId });
    await publish(r, r.next(1500));
    const seq = await feedCaughtUp(r, feed, "all");
    const full = client.book(r.pairId, "all");
    await eventually(
      "the client caught up",
      () => full.seq === seq,
      15_000,
      () => `${full.seq} of ${seq}`,
    );
    const expected = await conductorBook(r);
    expect(full.side("bid")).toEqual(expected.bids);
    expect(full.side("ask")).toEqual(expected.asks);
    const top = client.book(r.pairId, 10);
    await eventually("the depth-10 book caught up", () => top.seq === full.seq);
    expect(top.side("bid")).toEqual(expected.bids.slice(0, 10));
    expect(top.side("ask")).toEqual(expected.asks.slice(0, 10));
    for (const book of [full, top]) {
      expect({
        snapshots: book.snapshots,
        failures: book.checksumFailures,
        breaks: book.chainBreaks,
      }).toEqual({
        snapshots: 1,
        failures: 0,
        breaks: 0,
      });
      expect(book.updates).toBeGreaterThan(100);
    }
    const trades = client.messages.filter((m) => m.channel === "trades" && m.type === "update");
    expect(trades.length).toBeGreaterThan(10);
    // The REST snapshot carries the seq a subscriber holds.
    const rest = (await (
      await fetch(`${feed.url}/feed/books/${r.pairId}?depth=all`)
    ).json()) as Record<string, unknown>;
    expect(rest.seq).toBe(full.seq!);
    expect(rest.bids).toEqual(expected.bids);

    // A feed started now loads the same book from its own snapshot.
    const late = await startFeed(suite.stack, r.partition);
    feeds.push(late);
    const lateRest = (await (
      await fetch(`${late.url}/feed/books/${r.pairId}?depth=all`)
    ).json()) as Record<string, unknown>;
    expect(lateRest.bids).toEqual(expected.bids);
    expect(lateRest.asks).toEqual(expected.asks);
    expect(lateRest.checksum).toBe(rest.checksum as number);
  }, 120_000);

  test("resumes from a sequence number it held, or gets a snapshot", async () => {
    const r = await rig(4);
    await publish(r, r.next(200));
    const feed = await startFeed(suite.stack, r.partition);
    feeds.push(feed);
    const first = await openClient(feed);
    first.send({ op: "subscribe", channel: "book", pairId: r.pairId, depth: 25 });
    await eventually("a snapshot", () => first.book(r.pairId, 25).seq !== undefined);
    await publish(r, r.next(100));
    const caughtUp = await feedCaughtUp(r, feed, 25);
    await eventually("caught up", () => first.book(r.pairId, 25).seq === caughtUp);
    const held = first.book(r.pairId, 25);
    const heldSeq = held.seq!;
    first.close();
    await publish(r, r.next(200));
    const again = await openClient(feed);
    // The client carries on with the book it had.
    again.books.set(`${r.pairId}/25`, held);
    again.send({
      op: "subscribe",
      channel: "book",
      pairId: r.pairId,
      depth: 25,
      resumeFrom: heldSeq,
    });
    const seq = await feedCaughtUp(r, feed, 25);
    await eventually(
      "resumed to the end",
      () => held.seq === seq,
      15_000,
      () => `${held.seq} of ${seq}`,
    );
    expect(again.messages[0]).toMatchObject({ type: "subscribed", resumed: true });
    expect(await feed.metric("matching_feed_client_resumes")).toBe(1);
    expect({
      snapshots: held.snapshots,
      failures: held.checksumFailures,
      breaks: held.chainBreaks,
    }).toEqual({
      snapshots: 1,
      failures: 0,
      breaks: 0,
    });
    expect(held.side("bid")).toEqual((await conductorBook(r)).bids.slice(0, 25));
    // A number the feed no longer holds (or never gave) gets a snapshot instead.
    const stale = await openClient(feed);
    stale.send({ op: "subscribe", channel: "book", pairId: r.pairId, depth: 25, resumeFrom: 1 });
    await eventually("a snapshot", () => stale.messages.length >= 2);
    expect(stale.messages[0]).toMatchObject({ type: "subscribed", resumed: false });
    expect(stale.messages[1]).toMatchObject({ channel: "book", type: "snapshot", seq: held.seq! });
  }, 120_000);
});

describe("the feed across trouble", () => {
  test("loses its queue, loads a new snapshot and sends subscribers a fresh one", async () => {
    const r = await rig(6);
    await publish(r, r.next(200));
    const proxy = await startTcpProxy(suite.stack.brokerUrl);
    stops.push(() => proxy.close());
    const feed = await startFeed(suite.stack, r.partition, ["--broker-url", proxy.url]);
    feeds.push(feed);
    const client = await openClient(feed);
    client.send({ op: "subscribe", channel: "book", pairId: r.pairId, depth: "all" });
    const book = client.book(r.pairId, "all");
    await eventually("a snapshot", () => book.snapshots === 1);
    // The feed's queue goes with its connection: what is published meanwhile never reaches it.
    proxy.outage(1500);
    await publish(r, r.next(300));
    await eventually(
      "a new snapshot",
      async () => (await feed.metric("matching_feed_resyncs")) >= 2,
    );
    const seq = await feedCaughtUp(r, feed, "all");
    await eventually(
      "the client caught up",
      () => book.seq === seq,
      15_000,
      () => `${book.seq} of ${seq}`,
    );
    const snapshots = client.messages.filter((m) => m.type === "snapshot");
    expect(snapshots).toHaveLength(2);
    expect(String(snapshots[1]!.reason)).toContain("broker");
    expect({ failures: book.checksumFailures, breaks: book.chainBreaks }).toEqual({
      failures: 0,
      breaks: 0,
    });
    const expected = await conductorBook(r);
    expect(book.side("bid")).toEqual(expected.bids);
    expect(book.side("ask")).toEqual(expected.asks);
  }, 120_000);

  test("cuts off a client that stops reading; another client keeps its book", async () => {
    const r = await rig(7);
    await publish(r, r.next(300));
    const feed = await startFeed(suite.stack, r.partition, ["--client-buffer-bytes", "65536"]);
    feeds.push(feed);
    const reader = await openClient(feed);
    reader.send({ op: "subscribe", channel: "book", pairId: r.pairId, depth: "all" });
    const stalled = await stalledSocket(feed.url);
    stops.push(async () => stalled.destroy());
    // Every subscribe is answered with a whole L3 snapshot, and the socket reads none of them.
    const frame = maskedText(JSON.stringify({ op: "subscribe", channel: "l3", pairId: r.pairId }));
    for (let i = 0; i < 20; i++) stalled.write(frame);
    await eventually(
      "the stalled client cut off",
      async () => (await feed.metric("matching_feed_slow_clients_cut")) === 1,
    );
    await publish(r, r.next(200));
    const seq = await feedCaughtUp(r, feed, "all");
    const book = reader.book(r.pairId, "all");
    await eventually("the reader caught up", () => book.seq === seq);
    expect({
      failures: book.checksumFailures,
      breaks: book.chainBreaks,
      closed: reader.closed,
    }).toEqual({
      failures: 0,
      breaks: 0,
      closed: undefined,
    });
    // Read at last, the stalled socket ends: the feed closed it.
    let ended = false;
    stalled.on("close", () => {
      ended = true;
    });
    stalled.on("data", () => undefined);
    stalled.resume();
    await eventually("the stalled socket closed", () => ended);
  }, 120_000);
});

describe("requests the feed refuses", () => {
  test("bad requests get an error each and keep the connection, until too many", async () => {
    const r = await rig(5);
    const feed = await startFeed(suite.stack, r.partition);
    feeds.push(feed);
    const client = await openClient(feed);
    const bad = [
      "not json",
      { op: "subscribe", channel: "book", pairId: r.pairId, depth: 7 },
      { op: "subscribe", channel: "candles", pairId: r.pairId },
      { op: "subscribe", channel: "book", pairId: -1 },
      { op: "subscribe", channel: "book", pairId: r.pairId + 1 },
      { op: "subscribe", channel: "book", pairId: r.pairId, extra: 1 },
    ];
    for (const request of bad) client.send(request);
    client.send({ op: "ping" });
    await eventually("every answer", () => client.messages.length >= bad.length + 1);
    const errors = client.messages.slice(0, bad.length).map((m) => String(m.error));
    expect(client.messages.slice(0, bad.length).every((m) => m.type === "error")).toBe(true);
    expect(errors[0]).toBe("not JSON");
    expect(errors[1]).toContain("depth");
    expect(errors[2]).toContain("channel");
    expect(errors[3]).toContain("pairId");
    expect(errors[4]).toContain(`belongs to partition ${(r.pairId + 1) % partitionCount}`);
    expect(errors[5]).toContain("extra");
    expect(client.messages[bad.length]).toEqual({ type: "pong" });
    for (let i = 0; i < 20; i++) client.send("still not json");
    await eventually("closed", () => client.closed !== undefined);
    expect(client.closed).toEqual({ code: 4002, reason: "20 bad requests" });
  }, 60_000);
});
