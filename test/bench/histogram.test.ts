// The latency histogram: exact small values, bounded relative error, merge, and percentiles.

import { expect, test } from "bun:test";
import { LatencyHistogram } from "../../src/bench/histogram";

test("percentiles of a uniform 1..100000 ns distribution are within 2%", () => {
  const h = new LatencyHistogram();
  for (let v = 1; v <= 100_000; v++) h.record(v);
  const p = h.percentilesNs();
  for (const [value, expected] of [
    [p.p50, 50_000],
    [p.p95, 95_000],
    [p.p99, 99_000],
    [p.p999, 99_900],
  ] as const) {
    expect(Math.abs(value - expected) / expected).toBeLessThan(0.02);
  }
  expect(p.max).toBe(100_000);
});

test("merge adds counts and keeps the max", () => {
  const a = new LatencyHistogram();
  const b = new LatencyHistogram();
  a.record(10);
  b.record(1_000_000);
  a.merge(b);
  expect(a.count).toBe(2);
  expect(a.max).toBe(1_000_000);
  expect(a.valueAt(50)).toBe(10);
});
