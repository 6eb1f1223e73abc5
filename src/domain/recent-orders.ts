// Bounded memory of recently finished (filled or cancelled) order ids, so duplicates and cancels
// of finished orders are recognised without a memory that grows with history. Orders still
// resting are found in the engine's order index, not here.

/**
 * Two generations of ids: new ids go into `current`; when it holds half the capacity it becomes
 * `previous` and the old previous is dropped whole. This remembers at least the last capacity/2
 * and at most `capacity` ids, and avoids per-id deletions, which are slow in hash sets.
 */
export class RecentOrders {
  private current = new Set<string>();
  private previous = new Set<string>();
  private readonly generationSize: number;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 2) throw new RangeError("capacity must be >= 2");
    this.generationSize = Math.floor(capacity / 2);
  }

  has(id: string): boolean {
    return this.current.has(id) || this.previous.has(id);
  }

  finish(id: string): void {
    // Adding an id already present is a no-op, so only a full generation needs the lookup (an id
    // already in it must not start a new generation).
    if (this.current.size >= this.generationSize) {
      if (this.current.has(id)) return;
      this.previous = this.current;
      this.current = new Set();
    }
    this.current.add(id);
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }

  clear(): void {
    this.current = new Set();
    this.previous = new Set();
  }
}
