// One id index for the engine: resting orders by id, and a bounded memory of recently finished
// (filled or cancelled) ids, so a new order id costs one hash lookup for both the duplicate
// check and the resting-order check, and finishing a resting order overwrites its entry.

import { ChunkedArray } from "./chunked-array";
import { invariant } from "./invariant-error";
import type { OrderNode } from "./order-book";

/** The value get() returns for a remembered finished id. */
export const FINISHED = 0;

/**
 * Finished ids live in the same table as resting orders, tracked in two generations: when the
 * current generation holds half the capacity, the previous one is dropped from the table and the
 * current one becomes previous. This remembers at least the last capacity/2 and at most
 * `capacity` finished ids, like a two-generation set, but with a single table to consult.
 *
 * The table is one Int32Array of (hash, reference) pairs with open addressing and linear
 * probing; hash 0 marks an empty slot. A reference >= 0 is a resting order's handle (its place
 * in `nodes`); a reference < 0 is -(r + 1) for the finished id at position r of the ring that
 * holds the last two generations' ids. Why this shape: a JS Map of this size (100,000+ string
 * keys, most lookups misses) cost about 40% of the alternating bench; an array holding keys and
 * nodes was re-scanned by the garbage collector on every young collection; and with the hash
 * and reference side by side a lookup and the write after it touch one cache line, in a table
 * small enough (8 bytes a slot) to stay mostly in cache.
 */
export class OrderIndex {
  private table: Int32Array;
  /**
   * A 7-bit fingerprint of each slot's hash (0 when empty), one byte a slot: probes read only
   * this small array (it stays in cache), so a new id misses without touching `table`.
   */
  private fingerprints: Uint8Array;
  private mask: number;
  private size = 0;
  /** Resting orders by handle, and handles free for reuse (most recently freed first). */
  private readonly nodes = new ChunkedArray<OrderNode>();
  private freeHandles = new Int32Array(64);
  private freeCount = 0;
  private nextHandle = 0;
  /** Each handle's id hash, so finishing a resting order hashes nothing. */
  private handleHashes = new Int32Array(64);
  /** Finishes so far; finish n belongs to generation floor(n / generationSize). */
  private finishCount = 0;
  private readonly generationSize: number;
  /** Ids and hashes of the last two generations' finishes, at n mod (2 × generationSize). */
  private readonly finishedIds = new ChunkedArray<string>();
  private finishedHashes: Int32Array;
  /** Entries that are resting orders (the rest are finished ids). */
  resting = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 2) throw new RangeError("capacity must be >= 2");
    this.generationSize = Math.floor(capacity / 2);
    this.finishedHashes = new Int32Array(Math.min(2 * this.generationSize, 1024));
    const slots = 1024;
    this.table = new Int32Array(2 * slots);
    this.fingerprints = new Uint8Array(slots);
    this.mask = slots - 1;
  }

  /**
   * The resting order, FINISHED for a remembered finished id, or undefined. Here and below,
   * `hash` must be hashId(id); a caller that goes on to rest or finish the id passes it along.
   */
  get(id: string, hash = hashId(id)): OrderNode | typeof FINISHED | undefined {
    const slot = this.find(id, hash);
    if (slot < 0) return undefined;
    const ref = this.table[2 * slot + 1]!;
    return ref < 0 ? FINISHED : this.nodes.get(ref);
  }

  /** Registers a resting order; the caller has checked that the id is not resting already. */
  rest(node: OrderNode, hash = hashId(node.id)): void {
    const handle = this.freeCount > 0 ? this.freeHandles[--this.freeCount]! : this.nextHandle++;
    this.nodes.set(handle, node);
    if (handle >= this.handleHashes.length) this.handleHashes = grown(this.handleHashes);
    this.handleHashes[handle] = hash;
    node.handle = handle;
    this.set(node.id, hash, handle);
    this.resting++;
  }

  /**
   * Marks a resting order finished: its entry is overwritten, not deleted and re-added, and is
   * found by its handle, so no id string is compared.
   */
  finishResting(node: OrderNode): void {
    const handle = node.handle;
    invariant(handle >= 0, () => `order ${node.id} is not resting`);
    const hash = this.handleHashes[handle]!;
    const ref = this.recordFinish(node.id, hash);
    const table = this.table;
    const mask = this.mask;
    let slot = hash & mask;
    while (table[2 * slot] !== hash || table[2 * slot + 1] !== handle) {
      invariant(table[2 * slot] !== 0, () => `resting order ${node.id} is not indexed`);
      slot = (slot + 1) & mask;
    }
    table[2 * slot + 1] = ref;
    this.nodes.set(handle, undefined);
    if (this.freeCount === this.freeHandles.length) this.freeHandles = grown(this.freeHandles);
    this.freeHandles[this.freeCount++] = handle;
    node.handle = -1;
    this.resting--;
  }

  /** Remembers an id as finished (an order that never rested, or see finishResting). */
  finish(id: string, hash = hashId(id)): void {
    this.set(id, hash, this.recordFinish(id, hash));
  }

  /** Resting orders, in slot order. */
  *restingNodes(): Generator<[string, OrderNode]> {
    const table = this.table;
    for (let slot = 0; slot <= this.mask; slot++) {
      const ref = table[2 * slot + 1]!;
      if (table[2 * slot] === 0 || ref < 0) continue;
      const node = this.nodes.get(ref)!;
      // Yield the id the slot was filed under, as far as the table can tell: the node's, if the
      // slot's hash is that id's hash.
      yield [hashId(node.id) === table[2 * slot] ? node.id : `<misfiled ${slot}>`, node];
    }
  }

  clear(): void {
    this.table.fill(0);
    this.fingerprints.fill(0);
    this.size = 0;
    this.nodes.clear();
    this.freeCount = 0;
    this.nextHandle = 0;
    this.finishCount = 0;
    this.finishedIds.clear();
    this.resting = 0;
  }

  /**
   * Numbers a finish, first dropping the generation before the previous one when this finish
   * starts a new generation, and files the id in the ring. Returns the table reference for it.
   */
  private recordFinish(id: string, hash: number): number {
    const n = this.finishCount++;
    const generationSize = this.generationSize;
    if (n >= 2 * generationSize && n % generationSize === 0) {
      this.dropGeneration(n / generationSize - 2);
    }
    // The ring has room for two generations, so position r is reused only after its previous
    // finish's generation has been dropped.
    const at = n % (2 * generationSize);
    if (at >= this.finishedHashes.length) {
      const size = Math.min(2 * this.finishedHashes.length, 2 * generationSize);
      const larger = new Int32Array(size);
      larger.set(this.finishedHashes);
      this.finishedHashes = larger;
    }
    this.finishedIds.set(at, id);
    this.finishedHashes[at] = hash;
    return -(at + 1);
  }

  /**
   * Forgets the finished ids of generation `dropped` (an id rested or finished again since keeps
   * its newer entry). Deleting them one by one costs a few cache misses each, so when the table
   * is not much larger than a generation one sequential pass over it is cheaper.
   */
  private dropGeneration(dropped: number): void {
    const generationSize = this.generationSize;
    // The generation's ring positions, and so its references -(first + 1) .. -(first + size).
    const first = (dropped % 2) * generationSize;
    if (this.mask < 32 * generationSize) {
      this.sweep(-(first + generationSize), -(first + 1));
      return;
    }
    const table = this.table;
    const mask = this.mask;
    for (let at = first; at < first + generationSize; at++) {
      const hash = this.finishedHashes[at]!;
      const ref = -(at + 1);
      for (let slot = hash & mask; table[2 * slot] !== 0; slot = (slot + 1) & mask) {
        if (table[2 * slot] === hash && table[2 * slot + 1] === ref) {
          this.deleteSlot(slot);
          break;
        }
      }
    }
  }

  /**
   * Removes every entry whose reference lies in [low, high] in one cyclic pass that starts after
   * an empty slot. Each kept entry away from its home slot is re-placed at the first free slot
   * from its home; every slot between home and the entry has been visited (and cleared if
   * dropped) already, so probe runs stay unbroken without tombstones.
   */
  private sweep(low: number, high: number): void {
    const table = this.table;
    const fingerprints = this.fingerprints;
    const mask = this.mask;
    let start = 0;
    while (table[2 * start] !== 0) start++;
    for (let n = 1; n <= mask; n++) {
      const slot = (start + n) & mask;
      const hash = table[2 * slot]!;
      if (hash === 0) continue;
      const ref = table[2 * slot + 1]!;
      if (ref >= low && ref <= high) {
        table[2 * slot] = 0;
        fingerprints[slot] = 0;
        this.size--;
        continue;
      }
      let target = hash & mask;
      while (target !== slot && table[2 * target] !== 0) target = (target + 1) & mask;
      if (target !== slot) {
        table[2 * target] = hash;
        table[2 * target + 1] = ref;
        fingerprints[target] = fingerprints[slot]!;
        table[2 * slot] = 0;
        fingerprints[slot] = 0;
      }
    }
  }

  /** The id an entry was filed under. */
  private keyOf(ref: number): string | undefined {
    return ref < 0 ? this.finishedIds.get(-ref - 1) : this.nodes.get(ref)?.id;
  }

  /** The slot holding `id`, or the bitwise complement of the empty slot where it would go. */
  private find(id: string, hash: number): number {
    const fingerprints = this.fingerprints;
    const wanted = fingerprintOf(hash);
    const mask = this.mask;
    let slot = hash & mask;
    for (;;) {
      const stored = fingerprints[slot]!;
      if (stored === 0) return ~slot;
      if (
        stored === wanted &&
        this.table[2 * slot] === hash &&
        this.keyOf(this.table[2 * slot + 1]!) === id
      ) {
        return slot;
      }
      slot = (slot + 1) & mask;
    }
  }

  private set(id: string, hash: number, ref: number): void {
    let slot = this.find(id, hash);
    if (slot < 0) {
      slot = ~slot;
      this.table[2 * slot] = hash;
      this.table[2 * slot + 1] = ref;
      this.fingerprints[slot] = fingerprintOf(hash);
      // Keep the load at most three quarters: probe runs stay a few slots long, mostly within
      // one cache line (8 slots), and the table stays small enough to be mostly in cache.
      if (++this.size * 4 > 3 * this.mask) this.grow();
      return;
    }
    this.table[2 * slot + 1] = ref;
  }

  /** Backward-shift deletion: no tombstones, so misses stay short after many removals. */
  private deleteSlot(start: number): void {
    const table = this.table;
    const fingerprints = this.fingerprints;
    const mask = this.mask;
    let hole = start;
    let slot = start;
    for (;;) {
      slot = (slot + 1) & mask;
      const hash = table[2 * slot]!;
      if (hash === 0) break;
      const home = hash & mask;
      // An entry whose home lies cyclically in (hole, slot] is still reachable; leave it.
      const reachable = hole <= slot ? hole < home && home <= slot : hole < home || home <= slot;
      if (reachable) continue;
      table[2 * hole] = hash;
      table[2 * hole + 1] = table[2 * slot + 1]!;
      fingerprints[hole] = fingerprints[slot]!;
      hole = slot;
    }
    table[2 * hole] = 0;
    fingerprints[hole] = 0;
    this.size--;
  }

  private grow(): void {
    const old = this.table;
    const slots = 2 * (this.mask + 1);
    const mask = slots - 1;
    const table = new Int32Array(2 * slots);
    const fingerprints = new Uint8Array(slots);
    for (let i = 0; i < old.length; i += 2) {
      const hash = old[i]!;
      if (hash === 0) continue;
      let slot = hash & mask;
      while (table[2 * slot] !== 0) slot = (slot + 1) & mask;
      table[2 * slot] = hash;
      table[2 * slot + 1] = old[i + 1]!;
      fingerprints[slot] = fingerprintOf(hash);
    }
    this.table = table;
    this.fingerprints = fingerprints;
    this.mask = mask;
  }
}

/** 1..128 from the hash's top bits (the slot comes from its low bits); 0 means empty. */
function fingerprintOf(hash: number): number {
  return (hash >>> 25) + 1;
}

/** A copy of `array` with twice the length. */
function grown(array: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> {
  const larger = new Int32Array(2 * array.length);
  larger.set(array);
  return larger;
}

/**
 * FNV-1a over UTF-16 code units, finished with a murmur3 mix so low bits spread well. Never 0,
 * which marks an empty slot.
 */
export function hashId(id: string): number {
  let hash = 0x811c9dc5 | 0;
  for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b);
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash === 0 ? 1 : hash;
}
