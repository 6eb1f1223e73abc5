/**
 * `matchd watch PAIR`: the pair's live ladder in a terminal, from the feed's WebSocket. It
 * keeps the book as docs/marketdata.md says (snapshot, then updates chained by prevSeq, the
 * checksum checked after each) and redraws it with the last trades; `--once` prints the
 * snapshot and ends.
 */

import { bookChecksum } from "../../feed/checksum";
import type { LevelView } from "../../feed/price-levels";
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

class WatchedBook {
  bids = new Map<string, LevelView>();
  asks = new Map<string, LevelView>();
  seq: number | undefined;
  halted: string | undefined;
  checksumOk = true;
  trades: Trade[] = [];

  /** Applies a book message; false when it does not follow the book held (resubscribe). */
  apply(m: Message): boolean {
    if (m.type === "snapshot") {
      this.bids = new Map((m.bids as LevelView[]).map((l) => [l.price, l]));
      this.asks = new Map((m.asks as LevelView[]).map((l) => [l.price, l]));
    } else {
      if (m.prevSeq !== this.seq) return false;
      for (const l of m.bids as LevelView[]) this.set(this.bids, l);
      for (const l of m.asks as LevelView[]) this.set(this.asks, l);
    }
    if (m.halted !== undefined)
      this.halted = m.halted === true ? String(m.haltReason ?? "halted") : undefined;
    this.seq = m.seq as number;
    this.checksumOk = bookChecksum(this.side("bid"), this.side("ask")) === m.checksum;
    return this.checksumOk;
  }

  side(side: "bid" | "ask"): LevelView[] {
    const levels = [...(side === "bid" ? this.bids : this.asks).values()];
    return levels.sort((a, b) => (side === "bid" ? -1 : 1) * (Number(a.price) - Number(b.price)));
  }

  private set(side: Map<string, LevelView>, level: LevelView): void {
    if (level.volume === "0") side.delete(level.price);
    else side.set(level.price, level);
  }
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
  const status = `seq ${book.seq}, checksum ${book.checksumOk ? "ok" : "MISMATCH"}\n`;
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
      else if (!book.apply(m)) subscribe();
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
