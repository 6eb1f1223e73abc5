/** The per-partition event-order invariant: copies may go back, new events may not. */
import { describe, expect, test } from "bun:test";
import { StreamOrderCheck, streamOffset } from "../../bench/stream-order";

describe("stream order", () => {
  test("offsets order like the stream, sequence within a millisecond included", () => {
    expect(streamOffset("5-2")! > streamOffset("5-1")!).toBe(true);
    expect(streamOffset("6-0")! > streamOffset("5-4294967295")!).toBe(true);
    expect(streamOffset("x")).toBeUndefined();
    expect(streamOffset(undefined)).toBeUndefined();
  });

  test("in order, with equal offsets (one entry's events) and copies going back: no finding", () => {
    const check = new StreamOrderCheck();
    for (const [offset, copy] of [
      ["1-0", false],
      ["1-0", false],
      ["2-0", false],
      ["1-0", true],
      ["3-0", false],
    ] as const)
      check.record(offset, copy);
    expect(check).toMatchObject({ outOfOrder: 0, withoutOffset: 0 });
  });

  test("a copy that runs ahead does not make the events before it late", () => {
    const check = new StreamOrderCheck();
    for (const [offset, copy] of [
      ["1-0", false],
      ["5-0", true],
      ["2-0", false],
      ["5-0", false],
    ] as const)
      check.record(offset, copy);
    expect(check).toMatchObject({ outOfOrder: 0, withoutOffset: 0 });
  });

  test("a new event behind one already passed is out of order; a missing offset is counted", () => {
    const check = new StreamOrderCheck();
    check.record("2-0", false);
    check.record("1-5", false);
    check.record(undefined, false);
    expect(check).toMatchObject({ outOfOrder: 1, withoutOffset: 1 });
  });
});
