// The bench sinks' duplicate check: a repeated event id is caught whether it belongs to a
// command the bench sent (bit per ordinal) or not (set), and distinct events never are.

import { expect, test } from "bun:test";
import { SeenEvents } from "../../bench/event-dedup";

test("each event id is new once, then a duplicate", () => {
  const seen = new SeenEvents(3);
  expect(seen.isNew("c1:0:order.rested.v1", 1)).toBe(true);
  expect(seen.isNew("c1:1:order.filled.v1", 1)).toBe(true);
  expect(seen.isNew("c2:0:order.rested.v1", 2)).toBe(true);
  expect(seen.isNew("c1:0:order.rested.v1", 1)).toBe(false);
  expect(seen.isNew("c2:0:order.rested.v1", 2)).toBe(false);
  expect(seen.isNew("c1:2:deal.executed.v1", 1)).toBe(true);
});

test("events of unknown commands and high ordinals are tracked by id", () => {
  const seen = new SeenEvents(1);
  expect(seen.isNew("foreign:0:order.rested.v1", undefined)).toBe(true);
  expect(seen.isNew("foreign:0:order.rested.v1", undefined)).toBe(false);
  expect(seen.isNew("c0:40:order.filled.v1", 0)).toBe(true);
  expect(seen.isNew("c0:40:order.filled.v1", 0)).toBe(false);
  expect(seen.isNew("c0:41:order.filled.v1", 0)).toBe(true);
});
