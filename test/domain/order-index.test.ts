// The engine's id index against a plain model (a Map and two generation lists, dropped eagerly):
// random rests, finishes and lookups must agree at every step, across table growth, sweeps of a
// generation and the one-by-one path used when the table is much larger than a generation.

import { describe, expect, test } from "bun:test";
import { mulberry32 } from "../../bench/workloads";
import type { OrderNode } from "../../src/domain/order-book";
import { FINISHED, OrderIndex } from "../../src/domain/order-index";

/** The documented behaviour, written the obvious way. */
class ModelIndex {
  private readonly map = new Map<string, OrderNode | typeof FINISHED>();
  private current: string[] = [];
  private previous: string[] = [];
  resting = 0;

  constructor(private readonly generationSize: number) {}

  get(id: string): OrderNode | typeof FINISHED | undefined {
    return this.map.get(id);
  }

  rest(node: OrderNode): void {
    this.map.set(node.id, node);
    this.resting++;
  }

  finishResting(id: string): void {
    this.resting--;
    this.finish(id);
  }

  finish(id: string): void {
    if (this.current.length >= this.generationSize) {
      for (const old of this.previous) {
        if (this.map.get(old) === FINISHED) this.map.delete(old);
      }
      this.previous = this.current;
      this.current = [];
    }
    this.map.set(id, FINISHED);
    this.current.push(id);
  }
}

describe("OrderIndex", () => {
  test.each([
    // Small capacities with many resting orders take the one-by-one path; large ones sweep.
    [2, 1, 4000],
    [8, 2, 20_000],
    [64, 3, 20_000],
    [1000, 4, 60_000],
    [20_000, 5, 60_000],
  ])("capacity %i (seed %i, %i steps) agrees with the model", (capacity, seed, steps) => {
    const next = mulberry32(seed);
    const index = new OrderIndex(capacity);
    const model = new ModelIndex(Math.floor(capacity / 2));
    const resting: OrderNode[] = [];
    let fresh = 0;
    // Finished ids up to 39 Latin-1 characters are kept as bytes, others as strings: mix short,
    // UUID-shaped (either case), long and non-Latin-1 ids.
    const idOf = (n: number) => {
      const hex = (n * 2654435761 + seed).toString(16).padStart(12, "0").slice(-12);
      switch (n % 6) {
        case 0:
          return `o-${seed}-${n}`;
        case 1:
          return `long-order-id-${seed}-${n}-${"x".repeat(40)}`;
        case 2:
          return `ö€-${seed}-${n}`;
        case 3:
          return `0a1b2c3d-4e5f-4a6b-8c7d-${hex}`;
        case 4:
          return `0A1B2C3D-4E5F-4A6B-8C7D-${hex.toUpperCase()}`;
        default:
          return `mid-length-id-${seed}-${n}`;
      }
    };
    for (let step = 0; step < steps; step++) {
      const r = next();
      if (r < 0.35) {
        // A new id: look it up (usually a miss), then rest it.
        const id = idOf(fresh++);
        expect(index.get(id)).toBe(model.get(id));
        const node = { id } as OrderNode;
        index.rest(node);
        model.rest(node);
        resting.push(node);
      } else if (r < 0.6 && resting.length > 0) {
        const at = Math.floor(next() * resting.length);
        const node = resting[at]!;
        resting[at] = resting[resting.length - 1]!;
        resting.pop();
        index.finishResting(node);
        model.finishResting(node.id);
      } else if (r < 0.8) {
        // A taker that never rests.
        const id = idOf(fresh++);
        index.finish(id);
        model.finish(id);
      } else {
        // Any id seen so far, or one never seen.
        const id = idOf(Math.floor(next() * (fresh + 10)));
        expect(index.get(id)).toBe(model.get(id));
      }
      expect(index.resting).toBe(model.resting);
    }
    for (let n = 0; n < fresh + 10; n++) expect(index.get(idOf(n))).toBe(model.get(idOf(n)));
    const nodes = [...index.restingNodes()].map(([id]) => id).sort();
    expect(nodes).toEqual(resting.map((node) => node.id).sort());
  });

  test("ids whose hashes collide are told apart exactly", () => {
    const index = new OrderIndex(100);
    const hash = 12345;
    const ids = [
      "a-1",
      "a-2",
      "b-1",
      `long-${"y".repeat(60)}`,
      `long-${"y".repeat(59)}z`,
      "é-1",
      "€-1",
    ];
    // All filed under the same hash: every lookup must still compare the ids themselves.
    const node = { id: "r-1" } as OrderNode;
    index.rest(node, hash);
    for (const id of ids.slice(0, 4)) index.finish(id, hash);
    for (const id of ids.slice(0, 4)) expect(index.get(id, hash)).toBe(FINISHED);
    for (const id of ids.slice(4)) expect(index.get(id, hash)).toBeUndefined();
    expect(index.get("r-1", hash)).toBe(node);
    expect(index.get("r-2", hash)).toBeUndefined();
    index.finishResting(node);
    expect(index.get("r-1", hash)).toBe(FINISHED);
    for (const id of ids.slice(4)) index.finish(id, hash);
    for (const id of ids) expect(index.get(id, hash)).toBe(FINISHED);
    expect(index.get("a-3", hash)).toBeUndefined();
    expect(index.get(`long-${"y".repeat(58)}zz`, hash)).toBeUndefined();
  });
});
