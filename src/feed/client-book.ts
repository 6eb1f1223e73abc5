/**
 * A client's copy of one pair's book, kept from the feed's `book` messages the way
 * docs/marketdata.md tells clients to: take a snapshot, apply each update whose prevSeq is the
 * seq held, and check the checksum after each message. `matchd watch`, the bench's
 * subscribers and the tests keep their books with it.
 */

import { bookChecksum, checksumLevels } from "./checksum";
import { parseDecimal } from "./decimal-text";
import type { LevelView } from "./price-levels";

export class ClientBook {
  private bids = new Map<string, LevelView>();
  private asks = new Map<string, LevelView>();
  seq: number | undefined;
  /** The halt's reason while the pair is halted. */
  halted: string | undefined;
  snapshots = 0;
  updates = 0;
  checksumFailures = 0;
  /** Updates that did not follow the book held: not applied, the client must subscribe again. */
  chainBreaks = 0;

  /**
   * Applies a `book` snapshot or update; false when an update does not follow the book held
   * or the checksum after it differs: subscribe again.
   */
  apply(m: Record<string, unknown>): boolean {
    if (m.type === "snapshot") {
      this.bids = levelsOf(m.bids);
      this.asks = levelsOf(m.asks);
      this.snapshots++;
    } else {
      if (m.prevSeq !== this.seq) {
        this.chainBreaks++;
        return false;
      }
      for (const level of m.bids as LevelView[]) set(this.bids, level);
      for (const level of m.asks as LevelView[]) set(this.asks, level);
      this.updates++;
    }
    if (m.halted !== undefined) {
      this.halted = m.halted === true ? String(m.haltReason ?? "halted") : undefined;
    }
    this.seq = m.seq as number;
    const ok = this.checksum() === m.checksum;
    if (!ok) this.checksumFailures++;
    return ok;
  }

  /** A side best first: bids by price descending, asks ascending. */
  side(side: "bid" | "ask"): LevelView[] {
    const levels = [...(side === "bid" ? this.bids : this.asks).values()];
    const sign = side === "bid" ? -1 : 1;
    return levels.sort((a, b) => {
      const d = parseDecimal(a.price) - parseDecimal(b.price);
      return d === 0n ? 0 : d < 0n ? -sign : sign;
    });
  }

  private checksum(): number {
    const top = (side: "bid" | "ask") => this.side(side).slice(0, checksumLevels);
    return bookChecksum(top("bid"), top("ask"));
  }
}

function levelsOf(list: unknown): Map<string, LevelView> {
  return new Map((list as LevelView[]).map((level) => [level.price, level]));
}

/** A level of volume "0" left the book (or the subscription's depth). */
function set(side: Map<string, LevelView>, level: LevelView): void {
  if (level.volume === "0") side.delete(level.price);
  else side.set(level.price, level);
}
