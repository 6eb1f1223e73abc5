// The books' digest kept up to date level by level: a change marks its price level, and only
// marked levels are hashed again, in steps of a bounded number of orders, so that a caller
// with an event loop (the conductor's /digest) can yield between steps.

import { DigestSum, Fnv1a64, hashOrder } from "./digest";
import { invariant } from "./invariant-error";
import { type OrderNode, type PriceLevel, toRestingOrder } from "./order-book";

export class LevelDigests {
  private marked: PriceLevel[] = [];
  private readonly sum = new DigestSum();

  /** Called on every change to a level's orders; cheap, since most commands make a few. */
  mark(level: PriceLevel): void {
    if (level.digestMarked >= 0) return;
    level.digestMarked = this.marked.length;
    this.marked.push(level);
  }

  /**
   * A level emptied and dropped from its book counts nothing from now on: settled at once and
   * taken off the list, so that the list never holds more than the levels that still rest
   * (levels come and go for ever while nobody may ask for the digest).
   */
  dropped(level: PriceLevel): void {
    this.sum.subtract(level.digestHigh, level.digestLow);
    level.digestHigh = 0;
    level.digestLow = 0;
    const at = level.digestMarked;
    if (at < 0) return;
    const last = this.marked.pop()!;
    if (last !== level) {
      this.marked[at] = last;
      last.digestMarked = at;
    }
    level.digestMarked = -1;
  }

  /**
   * Hashes marked levels again until about `maxOrders` orders were hashed (a level is hashed
   * whole, however deep). True once no level is left marked: the digest is current.
   */
  step(maxOrders: number): boolean {
    let hashed = 0;
    while (this.marked.length > 0 && hashed < maxOrders) {
      const level = this.marked.pop()!;
      level.digestMarked = -1;
      // An emptied level is dropped (and settled) at once; one still listed would hash as
      // something where the books hold nothing.
      invariant(level.head !== null, () => `empty level ${level.priceText} left to hash`);
      this.sum.subtract(level.digestHigh, level.digestLow);
      const hash = new Fnv1a64();
      for (let node: OrderNode | null = level.head; node !== null; node = node.next) {
        hashOrder(hash, toRestingOrder(node));
      }
      level.digestHigh = hash.high();
      level.digestLow = hash.low();
      this.sum.add(level.digestHigh, level.digestLow);
      hashed += level.count;
    }
    return this.marked.length === 0;
  }

  /** The digest once step() returned true; the levels marked since are not in it. */
  hex(): string {
    return this.sum.hex();
  }

  /** A copy of the sum, for a caller that adds more to it (the engine's stops and halts). */
  copySum(): DigestSum {
    const copy = new DigestSum();
    copy.add(this.sum.hi, this.sum.lo);
    return copy;
  }

  /** Levels waiting to be hashed again. */
  get pending(): number {
    return this.marked.length;
  }

  /** Forgets every level: the books were cleared. */
  reset(): void {
    for (const level of this.marked) level.digestMarked = -1;
    this.marked = [];
    this.sum.hi = 0;
    this.sum.lo = 0;
  }
}
