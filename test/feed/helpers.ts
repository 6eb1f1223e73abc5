/**
 * A feed process for tests, and a WebSocket client that records the feed's messages and keeps
 * a book per pair and depth from them (src/feed/client-book.ts).
 */

import { ClientBook } from "../../src/feed/client-book";
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
