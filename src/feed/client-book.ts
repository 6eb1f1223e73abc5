/**
 * A client's copy of one pair's book, kept from the feed's `book` messages the way
 * docs/marketdata.md tells clients to: take a snapshot, apply each update whose prevSeq is the
 * seq held, and check the checksum after each message. `matchd watch`, the bench's
 * subscribers and the tests keep their books with it.
 */

import { bookChecksum } from "./checksum";
import { parseDecimal } from "./decimal-text";
import type { LevelView } from "./price-levels";

/**
 * One side of the copy, best first, kept sorted as levels come: a client checks the checksum
 * after every message, so its top levels are read far more often than they change.
 */
class ClientSide {
  /** Each level's price as a scaled integer, in the same order as `levels`. */
  private readonly prices: bigint[] = [];
  private readonly levels: LevelView[] = [];

  constructor(
    private readonly descending: boolean,
    list: readonly LevelView[] = [],
  ) {
    for (const level of list) this.set(level);
  }

  /** Puts a level in its place; a volume of "0" takes it out (it left the book or the depth). */
  set(level: LevelView): void {
    const price = parseDecimal(level.price);
    const at = this.placeOf(price);
    const found = at < this.prices.length && this.prices[at] === price;
    if (level.volume === "0") {
      if (found) {
        this.prices.splice(at, 1);
        this.levels.splice(at, 1);
      }
    } else if (found) {
      this.levels[at] = level;
    } else {
      this.prices.splice(at, 0, price);
      this.levels.splice(at, 0, level);
    }
  }

  /** Every level, best first: the side itself, not a copy. */
  bestFirst(): readonly LevelView[] {
    return this.levels;
  }

  /** Where a price is, or would go: the first place whose price is not better than it. */
  private placeOf(price: bigint): number {
    let low = 0;
    let high = this.prices.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const other = this.prices[mid]!;
      if (this.descending ? other > price : other < price) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}

export class ClientBook {
  private bids = new ClientSide(true);
  private asks = new ClientSide(false);
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
      this.bids = new ClientSide(true, m.bids as LevelView[]);
      this.asks = new ClientSide(false, m.asks as LevelView[]);
      this.snapshots++;
    } else {
      if (m.prevSeq !== this.seq) {
        this.chainBreaks++;
        return false;
      }
      for (const level of m.bids as LevelView[]) this.bids.set(level);
      for (const level of m.asks as LevelView[]) this.asks.set(level);
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
    return [...(side === "bid" ? this.bids : this.asks).bestFirst()];
  }

  private checksum(): number {
    // bookChecksum reads the top 10 levels itself: no copy of a side per message.
    return bookChecksum(this.bids.bestFirst(), this.asks.bestFirst());
  }
}
