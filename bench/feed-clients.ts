/**
 * The feed bench's subscribers: WebSocket clients that keep a pair's book from the feed as a
 * real client must (snapshot, updates chained by prevSeq, the checksum checked after each) and
 * note when each message arrived, by its seq, for the latency from the command's send.
 */

import { connect, type Socket } from "node:net";
import { ClientBook } from "../src/feed/client-book";
import type { LevelView } from "../src/feed/price-levels";
import type { Valkey } from "../src/infra/valkey/client";
import { partitionKeys } from "../src/infra/valkey/keys";
import { fetchMetrics, metricNumber } from "./services";

type Message = Record<string, unknown>;

/**
 * The messages the subscribers received lately, parsed. Every subscriber of a stream gets the
 * same text and the bench's clients share one process, where real ones would not: a text is
 * parsed once here, keyed by the text itself. Each client still applies what it received to
 * its own book and checks its own checksum. Nothing mutates a parsed message.
 */
const parsedTexts = new Map<string, Message>();
const parsedTextsKept = 256;

function parseShared(text: string): Message {
  let message = parsedTexts.get(text);
  if (message === undefined) {
    message = JSON.parse(text) as Message;
    if (parsedTexts.size >= parsedTextsKept) parsedTexts.clear();
    parsedTexts.set(text, message);
  }
  return message;
}

export class BenchFeedClient {
  readonly book = new ClientBook();
  closed: string | undefined;
  /** Each update's seq and arrival (performance.now()), in arrival order. */
  readonly arrivals: { seq: number[]; at: number[] } = { seq: [], at: [] };

  private constructor(
    private readonly ws: WebSocket,
    readonly pairId: number,
  ) {
    ws.onmessage = (event) => this.receive(parseShared(String(event.data)));
    ws.onclose = (event) => {
      this.closed = `${event.code} ${event.reason}`;
    };
  }

  /** Connects and subscribes to the pair's book at depth 10; resolves at the snapshot. */
  static async open(url: string, pairId: number): Promise<BenchFeedClient> {
    const ws = new WebSocket(url);
    const client = new BenchFeedClient(ws, pairId);
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error(`cannot connect to ${url}`));
    });
    ws.send(JSON.stringify({ op: "subscribe", channel: "book", pairId, depth: 10 }));
    for (let waited = 0; client.book.snapshots === 0; waited += 5) {
      if (waited > 30_000) throw new Error(`no snapshot of pair ${pairId} in 30 s`);
      await Bun.sleep(5);
    }
    return client;
  }

  close(): void {
    this.ws.close();
  }

  private receive(m: Message): void {
    if (m.channel !== "book" || (m.type !== "snapshot" && m.type !== "update")) return;
    if (m.type === "update") {
      this.arrivals.seq.push(m.seq as number);
      this.arrivals.at.push(performance.now());
    }
    this.book.apply(m);
  }
}

/** Waits until the feed applied every event and each client holds its pair's latest seq. */
export async function subscribersCaughtUp(
  feedUrl: string,
  valkey: Valkey,
  partition: number,
  clients: BenchFeedClient[],
): Promise<void> {
  const keys = partitionKeys(partition);
  const deadline = performance.now() + 120_000;
  const last = Number((await valkey.get(keys.eventSequence)) ?? 0);
  const seqOf = new Map<number, number>();
  for (;;) {
    const applied = metricNumber(await fetchMetrics(feedUrl), "matching_feed_sequence");
    if (applied >= last) {
      for (const pairId of new Set(clients.map((c) => c.pairId))) {
        const book = (await (await fetch(`${feedUrl}/feed/books/${pairId}?depth=10`)).json()) as {
          seq: number;
        };
        seqOf.set(pairId, book.seq);
      }
      if (clients.every((c) => c.book.seq === seqOf.get(c.pairId) || c.closed !== undefined))
        return;
    }
    if (performance.now() > deadline)
      throw new Error(
        `the feed's subscribers did not catch up in 120 s (events ${last}, feed ${applied})`,
      );
    await Bun.sleep(50);
  }
}

/** Clients whose book differs from the conductor's top 10 levels of their pair. */
export async function booksDiffering(
  conductorUrl: string,
  clients: BenchFeedClient[],
): Promise<number> {
  const books = new Map<number, { bids: LevelView[]; asks: LevelView[] }>();
  for (const pairId of new Set(clients.map((c) => c.pairId))) {
    books.set(
      pairId,
      (await (await fetch(`${conductorUrl}/books/${pairId}?depth=10`)).json()) as never,
    );
  }
  const same = (a: LevelView[], b: LevelView[]) => JSON.stringify(a) === JSON.stringify(b);
  return clients.filter((c) => {
    const book = books.get(c.pairId)!;
    return !same(c.book.side("bid"), book.bids) || !same(c.book.side("ask"), book.asks);
  }).length;
}

/** A WebSocket on a raw socket that reads nothing after the handshake. */
export async function stalledSocket(feedUrl: string): Promise<Socket> {
  const url = new URL(feedUrl);
  const socket = connect(Number(url.port), url.hostname);
  socket.on("error", () => undefined);
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write(
    `GET /ws HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
  );
  await new Promise<void>((resolve) => socket.once("data", () => resolve()));
  socket.pause();
  return socket;
}

/**
 * A subscriber that stops reading: subscribes to each pair's L3, trades and book at every
 * depth, then never reads. The feed must cut it off and go on serving everyone else.
 */
export async function openStalledSubscriber(
  feedUrl: string,
  pairIds: readonly number[],
): Promise<Socket> {
  const socket = await stalledSocket(feedUrl);
  for (const pairId of pairIds) {
    socket.write(maskedText(JSON.stringify({ op: "subscribe", channel: "l3", pairId })));
    socket.write(maskedText(JSON.stringify({ op: "subscribe", channel: "trades", pairId })));
    for (const depth of [10, 25, 100, 500, "all"]) {
      socket.write(maskedText(JSON.stringify({ op: "subscribe", channel: "book", pairId, depth })));
    }
  }
  return socket;
}

/** A client's text frame (clients must mask), for payloads under 126 bytes. */
export function maskedText(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  const masked = payload.map((byte, i) => byte ^ mask[i % 4]!);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, Buffer.from(masked)]);
}
