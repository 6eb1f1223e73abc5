/**
 * A consumer's restoring of one partition's event order from `x-partition-sequence`, the
 * contiguous number the commit gives each event: an event that arrives after a gap is held
 * until the gap fills. Over a broker node loss a queue can refuse one publish and take the
 * next; the outbox publishes the refused one again, so it arrives after later ones.
 */

export interface ResequencerCounts {
  /** Events that arrived while an earlier sequence number was still missing. */
  arrivedEarly: number;
  /** Copies of an event already delivered or held (by sequence number). */
  copies: number;
  /** Events without a readable sequence number, delivered as they came. */
  withoutSequence: number;
}

export class Resequencer<T> implements ResequencerCounts {
  private next: number | undefined;
  private readonly held = new Map<number, T>();
  arrivedEarly = 0;
  copies = 0;
  withoutSequence = 0;
  /** The longest a gap stayed open, from the first event held behind it until it filled. */
  longestGapMs = 0;
  private gapSince = 0;

  /**
   * `deliver` receives every event in sequence order, and every copy at once with `copy`
   * set. `first` is the first number expected; without it, the first arrival sets it.
   */
  constructor(
    private readonly deliver: (item: T, copy: boolean) => void,
    first?: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.next = first;
  }

  /** Events held behind a gap. */
  get waiting(): number {
    return this.held.size;
  }

  /** The first sequence number not yet delivered. */
  get expected(): number | undefined {
    return this.next;
  }

  push(sequence: string | undefined, item: T): void {
    const n = sequence === undefined ? Number.NaN : Number(sequence);
    if (!Number.isSafeInteger(n)) {
      this.withoutSequence++;
      this.deliver(item, false);
      return;
    }
    this.next ??= n;
    if (n < this.next || this.held.has(n)) {
      this.copies++;
      this.deliver(item, true);
      return;
    }
    if (n > this.next) {
      this.arrivedEarly++;
      if (this.held.size === 0) this.gapSince = this.now();
      this.held.set(n, item);
      return;
    }
    this.deliver(item, false);
    this.next = n + 1;
    this.drain();
  }

  /**
   * Gives up on the missing numbers: delivers everything held, in order, and returns how
   * many numbers were skipped (events lost, or never to arrive in this consumer's queue).
   */
  release(): number {
    let skipped = 0;
    const numbers = [...this.held.keys()].sort((a, b) => a - b);
    for (const n of numbers) {
      if (!this.held.has(n)) continue; // delivered by the drain of a number before it
      skipped += n - this.next!;
      this.next = n;
      this.drain();
    }
    return skipped;
  }

  private drain(): void {
    if (this.held.size === 0) return;
    for (;;) {
      const item = this.held.get(this.next!);
      if (item === undefined && !this.held.has(this.next!)) break;
      this.held.delete(this.next!);
      this.deliver(item as T, false);
      this.next! += 1;
    }
    // Held events past a second gap: that gap opens now.
    if (this.held.size === 0)
      this.longestGapMs = Math.max(this.longestGapMs, this.now() - this.gapSince);
    else this.gapSince = this.now();
  }
}
