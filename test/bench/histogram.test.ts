// The latency histogram: exact small values, bounded relative error, merge, and percentiles.

import { expect, test } from "bun:test";
import { LatencyHistogram } from "../../bench/histogram";
import { histogramSeries } from "../../bench/stack-boundary";

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

test("the rank of a percentile is exact at counts where floating point rounds it up", () => {
  // 99.9 x 41,000 / 100 is 40,959.00000000001 in floating point: the p99.9 rank is 40,959.
  for (const count of [20_000, 41_000, 82_000, 164_000]) {
    const h = new LatencyHistogram();
    const fast = count - count / 1000;
    for (let i = 0; i < fast; i++) h.record(1);
    for (let i = fast; i < count; i++) h.record(100);
    expect({ count, p999: h.valueAt(99.9) }).toEqual({ count, p999: 1 });
    h.record(100);
    expect({ count: count + 1, p999: h.valueAt(99.9) }).toEqual({ count: count + 1, p999: 100 });
  }
});

test("the HTML report's histogram series counts every recording, the slowest too", () => {
  const h = new LatencyHistogram();
  h.record(1e6);
  h.record(25e9);
  h.record(90e9);
  const series = histogramSeries(h);
  expect(series.reduce((sum, bucket) => sum + bucket.count, 0)).toBe(3);
  expect(series[series.length - 1]!.upperMs).toBeGreaterThanOrEqual(90_000 * 0.99);
});
