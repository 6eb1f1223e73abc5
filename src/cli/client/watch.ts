/**
 * `matchd watch PAIR`: the pair's live ladder in a terminal, from the feed's WebSocket. It
 * keeps the book as docs/marketdata.md says (snapshot, then updates chained by prevSeq, the
 * checksum checked after each) and redraws it with the last trades; `--once` prints the
 * snapshot and ends.
 */

import { ClientBook } from "../../feed/client-book";
import { ExitCode } from "../../infra/exit-codes";
import { ClientError } from "./client-error";
import { bookLadder } from "./format";

export interface WatchOptions {
  feedUrl: string;
  pairId: number;
  depth: number;
  once: boolean;
  out: (text: string) => void;
  stopped: Promise<unknown>;
}

interface Trade {
  seq: number;
  price: string;
  volume: string;
  takerSide: string;
}

type Message = Record<string, unknown>;

/** The book as the feed's messages keep it, with the pair's last trades. */
class WatchedBook extends ClientBook {
  trades: Trade[] = [];
  /** Whether the last book message followed the book held and passed its checksum. */
  inStep = true;
}

function draw(book: WatchedBook, options: WatchOptions): string {
  const ladder = bookLadder(options.pairId, {
    bids: book.side("bid").slice(0, options.depth),
    asks: book.side("ask").slice(0, options.depth),
    ...(book.halted === undefined ? {} : { halted: true, haltReason: book.halted }),
  });
  const trades = book.trades
    .slice(-5)
    .reverse()
    .map((t) => `  trade ${t.volume} @ ${t.price}, taker ${t.takerSide} (seq ${t.seq})\n`);
  const status = `seq ${book.seq}, checksum ${book.inStep ? "ok" : "MISMATCH or gap: resubscribing"}\n`;
  return ladder + trades.join("") + status;
}

export async function watchBook(options: WatchOptions): Promise<number> {
  const url = `${options.feedUrl.replace(/^http/, "ws")}/ws`;
  const ws = new WebSocket(url);
  const book = new WatchedBook();
  const subscribe = () => {
    ws.send(
      JSON.stringify({ op: "subscribe", channel: "book", pairId: options.pairId, depth: 100 }),
    );
    if (!options.once)
      ws.send(JSON.stringify({ op: "subscribe", channel: "trades", pairId: options.pairId }));
  };
  return new Promise<number>((resolve, reject) => {
    ws.onopen = subscribe;
    ws.onerror = () => reject(new ClientError(`cannot reach the feed at ${url}`, ExitCode.failure));
    ws.onclose = (event) => resolve(event.code === 1000 ? ExitCode.ok : ExitCode.failure);
    ws.onmessage = (event) => {
      const m = JSON.parse(String(event.data)) as Message;
      if (m.type === "error")
        return reject(new ClientError(`feed: ${String(m.error)}`, ExitCode.failure));
      if (m.channel === "trades" && m.type === "update") book.trades.push(...(m.trades as Trade[]));
      else if (m.channel !== "book" || (m.type !== "snapshot" && m.type !== "update")) return;
      else {
        book.inStep = book.apply(m);
        if (!book.inStep) subscribe();
      }
      if (options.once) {
        options.out(draw(book, options));
        ws.close(1000);
        return;
      }
      options.out(`\x1b[H\x1b[2J${draw(book, options)}`);
    };
    void options.stopped.then(() => ws.close(1000));
  });
}
