/**
 * A feed process for tests, and a WebSocket client that keeps a book from the feed's
 * messages the way docs/marketdata.md tells clients to: apply a snapshot, apply each update
 * whose prevSeq is the seq it holds, and check the checksum after every message.
 */

import { bookChecksum } from "../../src/feed/checksum";
import type { LevelView } from "../../src/feed/price-levels";
import { freePorts } from "../../src/stack/process";
import { metricsJson, spawnMatchd, type TestStack } from "../support/stack";

export interface FeedProcess {
  url: string;
  wsUrl: string;
  log: () => string;
  metric(name: string): Promise<number>;
  stop(): Promise<number>;
  dispose(): Promise<void>;
}

export async function startFeed(
  stack: TestStack,
  partition: number,
  extraArgs: string[] = [],
): Promise<FeedProcess> {
  const port = (await freePorts(1))[0]!;
  const { child, log } = spawnMatchd(
    ["feed", "--partition", String(partition), "--http-port", String(port), ...extraArgs],
    {
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      MATCHING_BROKER_URL: stack.brokerUrl,
      MATCHING_PARTITION_COUNT: "1024",
    },
  );
  const url = `http://127.0.0.1:${port}`;
  const handle: FeedProcess = {
    url,
    wsUrl: `ws://127.0.0.1:${port}/ws`,
    log,
    metric: async (name) => Number((await metricsJson(`${url}/metrics`))[name]),
    async stop() {
      child.kill("SIGTERM");
      return child.exited;
    },
    async dispose() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await child.exited;
    },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) return handle;
    if (child.exitCode !== null) throw new Error(`feed exited with ${child.exitCode}:\n${log()}`);
    if (Date.now() > deadline) {
      await handle.dispose();
      throw new Error(`feed did not become ready:\n${log()}`);
    }
    await Bun.sleep(50);
  }
}

type Message = Record<string, unknown>;

/** One pair's book as a client keeps it from `book` messages. */
export class ClientBook {
  bids = new Map<string, LevelView>();
  asks = new Map<string, LevelView>();
  seq: number | undefined;
  snapshots = 0;
  updates = 0;
  checksumFailures = 0;
  chainBreaks = 0;

  apply(m: Message): void {
    if (m.type === "snapshot") {
      this.bids = new Map((m.bids as LevelView[]).map((l) => [l.price, l]));
      this.asks = new Map((m.asks as LevelView[]).map((l) => [l.price, l]));
      this.snapshots++;
    } else {
      if (m.prevSeq !== this.seq) this.chainBreaks++;
      for (const [side, levels] of [
        [this.bids, m.bids],
        [this.asks, m.asks],
      ] as const) {
        for (const l of levels as LevelView[]) {
          if (l.volume === "0") side.delete(l.price);
          else side.set(l.price, l);
        }
      }
      this.updates++;
    }
    this.seq = m.seq as number;
    if (bookChecksum(this.side("bid"), this.side("ask")) !== m.checksum) this.checksumFailures++;
  }

  /** A side best first. */
  side(side: "bid" | "ask"): LevelView[] {
    const levels = [...(side === "bid" ? this.bids : this.asks).values()];
    return levels.sort((a, b) => (side === "bid" ? -1 : 1) * (Number(a.price) - Number(b.price)));
  }
}

/** A WebSocket client of the feed that records every message and keeps the books it gets. */
export class FeedClient {
  readonly messages: Message[] = [];
  readonly books = new Map<string, ClientBook>();
  closed: { code: number; reason: string } | undefined;
  private constructor(private readonly ws: WebSocket) {
    ws.onmessage = (event) => this.receive(JSON.parse(String(event.data)) as Message);
    ws.onclose = (event) => {
      this.closed = { code: event.code, reason: event.reason };
    };
  }

  static open(url: string): Promise<FeedClient> {
    const ws = new WebSocket(url);
    const client = new FeedClient(ws);
    return new Promise((resolve, reject) => {
      ws.onopen = () => resolve(client);
      ws.onerror = () => reject(new Error(`cannot connect to ${url}`));
    });
  }

  send(request: unknown): void {
    this.ws.send(typeof request === "string" ? request : JSON.stringify(request));
  }

  book(pairId: number, depth: number | "all" = 10): ClientBook {
    const key = `${pairId}/${depth}`;
    const book = this.books.get(key) ?? new ClientBook();
    this.books.set(key, book);
    return book;
  }

  close(): void {
    this.ws.close();
  }

  private receive(m: Message): void {
    this.messages.push(m);
    if (m.channel === "book" && (m.type === "snapshot" || m.type === "update")) {
      this.book(m.pairId as number, m.depth as number | "all").apply(m);
    }
  }
}
