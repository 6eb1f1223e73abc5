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
 * The table is one Int32Array of references with open addressing and linear probing, beside a
 * byte array of fingerprints where 0 marks an empty slot. A reference >= 0 is a resting order's
 * handle (its place in `nodes`); a reference < 0 is -(r + 1) for the finished id at position r
 * of the ring that holds the last two generations' ids. An entry's full hash is not in the
 * table but in `handleHashes` or `finishedHashes`, read only on a fingerprint match or when
 * entries move. Why this shape: a JS Map of this size (100,000+ string keys, most lookups
 * misses) cost about 40% of the alternating bench; an array holding keys and nodes was
 * re-scanned by the garbage collector on every young collection; and at 5 bytes a slot the
 * table and fingerprints stay in a core's L2 cache, where 9 bytes a slot (hash beside
 * reference) at a lower load did not and cost a cache miss on most inserts.
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
  /**
   * Ids and hashes of the last two generations' finishes, at n mod (2 × generationSize). An id
   * is kept as its characters in `finishedChars` (ID_STRIDE bytes a position: the length, then
   * the characters) when it is short and Latin-1, which is nearly always; otherwise, marked
   * LONG_ID, as the string in `longIds`. Keeping 100,000 id strings alive cost the garbage
   * collector more than copying a few dozen bytes per finish; a lookup that lands on a finished
   * entry compares the characters, so the check stays exact.
   */
  private finishedChars: Uint8Array;
  private readonly longIds = new ChunkedArray<string>();
  private finishedHashes: Int32Array;
  /** Entries that are resting orders (the rest are finished ids). */
  resting = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 2) throw new RangeError("capacity must be >= 2");
    this.generationSize = Math.floor(capacity / 2);
    const positions = Math.min(2 * this.generationSize, 1024);
    this.finishedHashes = new Int32Array(positions);
    this.finishedChars = new Uint8Array(positions * ID_STRIDE);
    const slots = 1024;
    this.table = new Int32Array(slots);
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
    const ref = this.table[slot]!;
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
    const fingerprints = this.fingerprints;
    const mask = this.mask;
    // Handles are unique among entries, so the reference alone identifies the slot.
    let slot = hash & mask;
    while (table[slot] !== handle || fingerprints[slot] === 0) {
      invariant(fingerprints[slot] !== 0, () => `resting order ${node.id} is not indexed`);
      slot = (slot + 1) & mask;
    }
    table[slot] = ref;
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
      const ref = table[slot]!;
      if (this.fingerprints[slot] === 0 || ref < 0) continue;
      const node = this.nodes.get(ref)!;
      // Yield the id the slot was filed under, as far as the table can tell: the node's, if the
      // handle's recorded hash is that id's hash and the slot's fingerprint agrees with it.
      const hash = this.handleHashes[ref]!;
      const filed = hashId(node.id) === hash && this.fingerprints[slot] === fingerprintOf(hash);
      yield [filed ? node.id : `<misfiled ${slot}>`, node];
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
    this.longIds.clear();
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
      const chars = new Uint8Array(size * ID_STRIDE);
      chars.set(this.finishedChars);
      this.finishedChars = chars;
    }
    this.storeFinishedId(at, id);
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
    const fingerprints = this.fingerprints;
    const mask = this.mask;
    for (let at = first; at < first + generationSize; at++) {
      const hash = this.finishedHashes[at]!;
      const ref = -(at + 1);
      for (let slot = hash & mask; fingerprints[slot] !== 0; slot = (slot + 1) & mask) {
        if (table[slot] === ref) {
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
    while (fingerprints[start] !== 0) start++;
    for (let n = 1; n <= mask; n++) {
      const slot = (start + n) & mask;
      const fingerprint = fingerprints[slot]!;
      if (fingerprint === 0) continue;
      const ref = table[slot]!;
      if (ref >= low && ref <= high) {
        fingerprints[slot] = 0;
        this.size--;
        continue;
      }
      let target = this.hashOf(ref) & mask;
      while (target !== slot && fingerprints[target] !== 0) target = (target + 1) & mask;
      if (target !== slot) {
        table[target] = ref;
        fingerprints[target] = fingerprint;
        fingerprints[slot] = 0;
      }
    }
  }

  /** Files `id` at ring position `at`, as characters when it fits (see finishedChars). */
  private storeFinishedId(at: number, id: string): void {
    const chars = this.finishedChars;
    const base = at * ID_STRIDE;
    if (chars[base] === LONG_ID) this.longIds.set(at, undefined);
    const length = id.length;
    if (length < ID_STRIDE) {
      let i = 0;
      while (i < length) {
        const code = id.charCodeAt(i);
        if (code > 0xff) break;
        chars[base + 1 + i] = code;
        i++;
      }
      if (i === length) {
        chars[base] = length;
        return;
      }
    }
    chars[base] = LONG_ID;
    this.longIds.set(at, id);
  }

  /** The id hash of the entry with reference `ref`. */
  private hashOf(ref: number): number {
    return ref < 0 ? this.finishedHashes[-ref - 1]! : this.handleHashes[ref]!;
  }

  /** True when the entry with reference `ref` was filed under exactly `id`. */
  private isKey(ref: number, id: string): boolean {
    if (ref >= 0) return this.nodes.get(ref)?.id === id;
    const at = -ref - 1;
    const chars = this.finishedChars;
    const base = at * ID_STRIDE;
    const length = chars[base]!;
    if (length === LONG_ID) return this.longIds.get(at) === id;
    if (length !== id.length) return false;
    for (let i = 0; i < length; i++) {
      if (chars[base + 1 + i] !== id.charCodeAt(i)) return false;
    }
    return true;
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
      if (stored === wanted) {
        const ref = this.table[slot]!;
        if (this.hashOf(ref) === hash && this.isKey(ref, id)) return slot;
      }
      slot = (slot + 1) & mask;
    }
  }

  private set(id: string, hash: number, ref: number): void {
    let slot = this.find(id, hash);
    if (slot < 0) {
      slot = ~slot;
      this.table[slot] = ref;
      this.fingerprints[slot] = fingerprintOf(hash);
      if (++this.size * LOAD_DENOMINATOR > LOAD_NUMERATOR * this.mask) this.grow();
      return;
    }
    this.table[slot] = ref;
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
      if (fingerprints[slot] === 0) break;
      const ref = table[slot]!;
      const home = this.hashOf(ref) & mask;
      // An entry whose home lies cyclically in (hole, slot] is still reachable; leave it.
      const reachable = hole <= slot ? hole < home && home <= slot : hole < home || home <= slot;
      if (reachable) continue;
      table[hole] = ref;
      fingerprints[hole] = fingerprints[slot]!;
      hole = slot;
    }
    fingerprints[hole] = 0;
    this.size--;
  }

  private grow(): void {
    const old = this.table;
    const oldFingerprints = this.fingerprints;
    const slots = 2 * (this.mask + 1);
    const mask = slots - 1;
    const table = new Int32Array(slots);
    const fingerprints = new Uint8Array(slots);
    for (let i = 0; i < old.length; i++) {
      if (oldFingerprints[i] === 0) continue;
      const ref = old[i]!;
      let slot = this.hashOf(ref) & mask;
      while (fingerprints[slot] !== 0) slot = (slot + 1) & mask;
      table[slot] = ref;
      fingerprints[slot] = oldFingerprints[i]!;
    }
    this.table = table;
    this.fingerprints = fingerprints;
    this.mask = mask;
  }
}

/**
 * The table grows when more than LOAD_NUMERATOR / LOAD_DENOMINATOR of its slots are used. A
 * probe reads one fingerprint byte a slot, so runs a little longer than at lower loads still
 * stay within a cache line or two, and the table stays half the size: 100,000 remembered ids
 * fit 131,072 slots (640 KiB with the fingerprints), which stays in a core's L2 cache.
 */
const LOAD_NUMERATOR = 7;
const LOAD_DENOMINATOR = 8;

/** Bytes per finished id position: a length byte, then up to ID_STRIDE - 1 Latin-1 characters. */
const ID_STRIDE = 40;
/** The length byte of a position whose id is kept as a string in longIds. */
const LONG_ID = 0xff;

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
