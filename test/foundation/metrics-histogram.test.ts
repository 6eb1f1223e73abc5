// The registry's bucketed histogram: each value lands in the first bucket at or above it, and
// the fine series reads quantiles within a quarter of the true value.

import { expect, test } from "bun:test";
import { fineBuckets, Histogram } from "../../src/infra/metrics";

test("a value lands in the first bucket at or above it; beyond the last only count and max see it", () => {
  const histogram = new Histogram("h", "help", [0.001, 0.01, 0.1]);
  for (const value of [0.0005, 0.001, 0.0011, 0.01, 0.05, 0.2]) histogram.observe(value);
  expect(histogram.counts).toEqual([2, 2, 1]);
  expect(histogram.count).toBe(6);
  expect(histogram.max).toBe(0.2);
});

test("the fine series rises and its quantiles overstate a spread of latencies by under 30 %", () => {
  for (let i = 1; i < fineBuckets.length; i++) {
    expect(fineBuckets[i]!).toBeGreaterThan(fineBuckets[i - 1]!);
    // Neighbours under 1.3 apart: a value just above a bound reads at most that much high.
    expect(fineBuckets[i]! / fineBuckets[i - 1]!).toBeLessThan(1.3);
  }
  // A value just above each bound below 30 s reads as the next bound: the worst case.
  for (let i = 0; i + 1 < fineBuckets.length; i++) {
    const value = fineBuckets[i]! * 1.0001;
    const one = new Histogram("h", "help", fineBuckets);
    one.observe(value);
    one.observe(value * 10); // a larger maximum, so the read is the bucket bound, not the max
    expect(one.quantile(0.5) / value).toBeLessThan(1.3);
  }
  const histogram = new Histogram("h", "help", fineBuckets);
  // 1 ms .. 200 ms, uniform: p50 ~100.5 ms, p99 ~198 ms.
  for (let ms = 1; ms <= 200; ms++) histogram.observe(ms / 1000);
  for (const [q, exact] of [
    [0.5, 0.1],
    [0.99, 0.198],
  ] as const) {
    const read = histogram.quantile(q);
    expect(read).toBeGreaterThanOrEqual(exact);
    expect(read / exact).toBeLessThan(1.3);
  }
});
