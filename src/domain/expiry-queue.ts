// Deadlines in a binary min-heap on (at, sequence, id): the good-till-date orders and stops
// (ties in time priority), or the dead-man's switches (sequence 0: ties by user id), so a
// clock.tick finds what is due in deadline order. No I/O, no clock.

/** One armed deadline; it goes stale when its order leaves or takes a new sequence. */
export interface ExpiryEntry {
  at: number;
  sequence: number;
  id: string;
}

function before(a: ExpiryEntry, b: ExpiryEntry): boolean {
  if (a.at !== b.at) return a.at < b.at;
  if (a.sequence !== b.sequence) return a.sequence < b.sequence;
  // Equal sequences: the dead-man's switches, which have none, go by user id.
  return a.id < b.id;
}

/**
 * Entries are not removed when their order fills or is cancelled (that would need a handle
 * on every path that ends an order); the reader skips stale ones, and `compact` drops them
 * once the heap has doubled since the last compaction, so it stays within about twice the
 * armed orders plus COMPACT_FLOOR.
 */
export class ExpiryQueue {
  private heap: ExpiryEntry[] = [];
  private compactAt = COMPACT_FLOOR;

  get size(): number {
    return this.heap.length;
  }

  /** True when the heap has grown enough that the caller should compact it. */
  get wantsCompaction(): boolean {
    return this.heap.length >= this.compactAt;
  }

  push(at: number, sequence: number, id: string): void {
    const heap = this.heap;
    heap.push({ at, sequence, id });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  peek(): ExpiryEntry | undefined {
    return this.heap[0];
  }

  pop(): ExpiryEntry | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    heap[0] = last;
    this.siftDown(0);
    return top;
  }

  /** Every entry, stale ones included, in no particular order. */
  entries(): readonly ExpiryEntry[] {
    return this.heap;
  }

  /** Keeps only the entries `live` accepts. */
  compact(live: (entry: ExpiryEntry) => boolean): void {
    const kept = this.heap.filter(live);
    kept.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
    this.heap = kept;
    this.compactAt = Math.max(COMPACT_FLOOR, 2 * kept.length);
  }

  clear(): void {
    this.heap = [];
    this.compactAt = COMPACT_FLOOR;
  }

  private siftDown(start: number): void {
    const heap = this.heap;
    const n = heap.length;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < n && before(heap[left]!, heap[least]!)) least = left;
      if (right < n && before(heap[right]!, heap[least]!)) least = right;
      if (least === i) return;
      [heap[i], heap[least]] = [heap[least]!, heap[i]!];
      i = least;
    }
  }
}

/** Entries held before stale ones are first dropped. */
const COMPACT_FLOOR = 1024;
