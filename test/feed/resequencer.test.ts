/** The consumer's restoring of a partition's order from its events' sequence numbers. */
import { describe, expect, test } from "bun:test";
import { Resequencer } from "../../src/feed/resequencer";

let clock = 0;

function collect(first?: number) {
  const delivered: string[] = [];
  const r = new Resequencer<string>(
    (item, copy) => delivered.push(copy ? `${item}*` : item),
    first,
    () => clock,
  );
  return { r, delivered };
}

describe("Resequencer", () => {
  test("delivers in order what came in order", () => {
    const { r, delivered } = collect();
    for (const n of [5, 6, 7]) r.push(String(n), `e${n}`);
    expect(delivered).toEqual(["e5", "e6", "e7"]);
    expect(r).toMatchObject({ arrivedEarly: 0, copies: 0, waiting: 0, expected: 8 });
  });

  test("holds what came after a gap until the gap fills, then the resend's copies pass as copies", () => {
    // The outbox's retry after a refused e2: e3 and e4 got through first, then e2, e3, e4 again.
    const { r, delivered } = collect(1);
    for (const n of [1, 3, 4, 2, 3, 4, 5]) r.push(String(n), `e${n}`);
    expect(delivered).toEqual(["e1", "e2", "e3", "e4", "e3*", "e4*", "e5"]);
    expect(r).toMatchObject({ arrivedEarly: 2, copies: 2, waiting: 0 });
  });

  test("measures how long a gap stayed open", () => {
    const { r } = collect(1);
    clock = 100;
    r.push("2", "e2");
    clock = 350;
    r.push("1", "e1");
    expect(r.longestGapMs).toBe(250);
    clock = 400;
    r.push("4", "e4");
    clock = 450;
    r.push("3", "e3");
    expect(r.longestGapMs).toBe(250);
  });

  test("a copy of a held event is a copy, not a second hold", () => {
    const { r, delivered } = collect(1);
    for (const n of [2, 2, 1]) r.push(String(n), `e${n}`);
    expect(delivered).toEqual(["e2*", "e1", "e2"]);
  });

  test("a gap that never fills stays held until released, and the release counts it", () => {
    const { r, delivered } = collect(1);
    for (const n of [1, 3, 4, 7]) r.push(String(n), `e${n}`);
    expect(delivered).toEqual(["e1"]);
    expect(r.waiting).toBe(3);
    expect(r.release()).toBe(3); // 2, 5 and 6
    expect(delivered).toEqual(["e1", "e3", "e4", "e7"]);
    expect(r).toMatchObject({ waiting: 0, expected: 8 });
  });

  test("an event without a number is delivered as it came", () => {
    const { r, delivered } = collect(1);
    r.push(undefined, "a");
    r.push("x", "b");
    expect(delivered).toEqual(["a", "b"]);
    expect(r.withoutSequence).toBe(2);
  });
});
