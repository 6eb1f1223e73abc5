// One id index for the engine: resting orders by id, and a bounded memory of recently finished
// (filled or cancelled) ids, so a new order id costs one hash lookup for both the duplicate
// check and the resting-order check, and finishing a resting order overwrites its entry.

import type { OrderNode } from "./order-book";

/** The value a finished id maps to. */
export const FINISHED = 0;

/**
 * Finished ids live in the same map as resting orders, tracked in two generations: when the
 * current generation holds half the capacity, the previous one is dropped from the map and the
 * current one becomes previous. This remembers at least the last capacity/2 and at most
 * `capacity` finished ids, like a two-generation set, but with a single map to consult.
 */
export class OrderIndex {
  // Open addressing with linear probing over parallel arrays. A JS Map of this size (100,000+
  // string keys, most lookups misses) cost about 40% of the alternating bench; comparing stored
  // 32-bit hashes first avoids touching other keys' strings on a miss.
  private keys: (string | undefined)[];
  private values: (OrderNode | typeof FINISHED | undefined)[];
  private hashes: Int32Array;
  private mask: number;
  private size = 0;
  private current: string[] = [];
  private previous: string[] = [];
  private readonly generationSize: number;
  /** Entries that are resting orders (the rest are finished ids). */
  resting = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 2) throw new RangeError("capacity must be >= 2");
    this.generationSize = Math.floor(capacity / 2);
    const slots = 1024;
    this.keys = new Array(slots).fill(undefined);
    this.values = new Array(slots).fill(undefined);
    this.hashes = new Int32Array(slots);
    this.mask = slots - 1;
  }

  /** The resting order, FINISHED for a remembered finished id, or undefined. */
  get(id: string): OrderNode | typeof FINISHED | undefined {
    const slot = this.find(id, hashId(id));
    return slot < 0 ? undefined : this.values[slot];
  }

  /** Registers a resting order; the caller has checked that the id is not resting already. */
  rest(node: OrderNode): void {
    this.set(node.id, node);
    this.resting++;
  }

  /** Marks a resting order finished: its entry is overwritten, not deleted and re-added. */
  finishResting(id: string): void {
    this.resting--;
    this.finish(id);
  }

  /** Remembers an id as finished (an order that never rested, or see finishResting). */
  finish(id: string): void {
    if (this.current.length >= this.generationSize) {
      const old = this.previous;
      for (let i = 0; i < old.length; i++) {
        const oldId = old[i]!;
        const slot = this.find(oldId, hashId(oldId));
        // An id forgotten and then rested again must keep its node; only finished marks go.
        if (slot >= 0 && this.values[slot] === FINISHED) this.deleteSlot(slot);
      }
      old.length = 0;
      this.previous = this.current;
      this.current = old;
    }
    this.set(id, FINISHED);
    this.current.push(id);
  }

  /** Resting orders, in slot order. */
  *restingNodes(): Generator<[string, OrderNode]> {
    for (let i = 0; i < this.keys.length; i++) {
      const value = this.values[i];
      if (value !== undefined && value !== FINISHED) yield [this.keys[i]!, value];
    }
  }

  clear(): void {
    this.keys.fill(undefined);
    this.values.fill(undefined);
    this.size = 0;
    this.current = [];
    this.previous = [];
    this.resting = 0;
  }

  /** The slot holding `id`, or the bitwise complement of the empty slot where it would go. */
  private find(id: string, hash: number): number {
    const keys = this.keys;
    const hashes = this.hashes;
    const mask = this.mask;
    let slot = hash & mask;
    for (;;) {
      const key = keys[slot];
      if (key === undefined) return ~slot;
      if (hashes[slot] === hash && key === id) return slot;
      slot = (slot + 1) & mask;
    }
  }

  private set(id: string, value: OrderNode | typeof FINISHED): void {
    const hash = hashId(id);
    let slot = this.find(id, hash);
    if (slot >= 0) {
      this.values[slot] = value;
      return;
    }
    slot = ~slot;
    this.keys[slot] = id;
    this.values[slot] = value;
    this.hashes[slot] = hash;
    // Keep the load at most one half so probe runs stay short.
    if (++this.size * 2 > this.mask) this.grow();
  }

  /** Backward-shift deletion: no tombstones, so misses stay short after many removals. */
  private deleteSlot(start: number): void {
    const keys = this.keys;
    const values = this.values;
    const hashes = this.hashes;
    const mask = this.mask;
    let hole = start;
    let slot = start;
    for (;;) {
      slot = (slot + 1) & mask;
      const key = keys[slot];
      if (key === undefined) break;
      const home = hashes[slot]! & mask;
      // An entry whose home lies cyclically in (hole, slot] is still reachable; leave it.
      const reachable = hole <= slot ? hole < home && home <= slot : hole < home || home <= slot;
      if (reachable) continue;
      keys[hole] = key;
      values[hole] = values[slot];
      hashes[hole] = hashes[slot]!;
      hole = slot;
    }
    keys[hole] = undefined;
    values[hole] = undefined;
    this.size--;
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldValues = this.values;
    const oldHashes = this.hashes;
    const slots = oldKeys.length * 2;
    const mask = slots - 1;
    const keys: (string | undefined)[] = new Array(slots).fill(undefined);
    const values: (OrderNode | typeof FINISHED | undefined)[] = new Array(slots).fill(undefined);
    const hashes = new Int32Array(slots);
    for (let i = 0; i < oldKeys.length; i++) {
      const key = oldKeys[i];
      if (key === undefined) continue;
      const hash = oldHashes[i]!;
      let slot = hash & mask;
      while (keys[slot] !== undefined) slot = (slot + 1) & mask;
      keys[slot] = key;
      values[slot] = oldValues[i];
      hashes[slot] = hash;
    }
    this.keys = keys;
    this.values = values;
    this.hashes = hashes;
    this.mask = mask;
  }
}

/** FNV-1a over UTF-16 code units, finished with a murmur3 mix so low bits spread well. */
function hashId(id: string): number {
  let hash = 0x811c9dc5 | 0;
  for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b);
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35);
  return hash ^ (hash >>> 16);
}
