/**
 * The pipeline sampler's timeline fold: one pass with cursors gives what filtering every
 * sample for every point gives, on irregular samples, counters and points.
 */
import { describe, expect, test } from "bun:test";
import { type CounterSample, foldTimeline, type QueueSample } from "../../bench/pipeline-sampler";
import type { TimelinePoint } from "../../bench/series-recorder";

/** The fold as a filter per point: quadratic, and plainly right. */
function reference(
  points: TimelinePoint[],
  startedAt: number,
  samples: QueueSample[],
  counters: CounterSample[],
): TimelinePoint[] {
  const t = (at: number) => (at - startedAt) / 1000;
  return points.map((point, k) => {
    const from = k === 0 ? 0 : points[k - 1]!.tSeconds;
    const inside = samples.filter((s) => t(s.at) >= from && t(s.at) < point.tSeconds);
    const fromAt = startedAt + from * 1000;
    const toAt = startedAt + point.tSeconds * 1000;
    const start = [...counters].reverse().find((c) => c.at <= fromAt) ?? counters[0];
    const end = counters.find((c) => c.at >= toAt) ?? counters[counters.length - 1];
    const out: TimelinePoint = {
      ...point,
      queueDepth: Math.max(0, ...inside.map((s) => s.queueDepth)),
      streamLength: Math.max(0, ...inside.map((s) => s.streamLength)),
    };
    if (start === undefined || end === undefined || end.at <= start.at) return out;
    const batches = end.batches - start.batches;
    const span = (end.at - start.at) / 1000;
    const collections = {
      bench: Math.round(((end.collections.bench! - start.collections.bench!) / span) * 10) / 10,
    };
    if (batches > 0) out.batchSize = (end.batchedCommands - start.batchedCommands) / batches;
    return { ...out, collections };
  });
}

describe("pipeline sampler timeline", () => {
  test("the one-pass fold equals the filter per point", () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const startedAt = 10_000;
    const samples: QueueSample[] = [];
    // From before the run's start (negative times) to past its end.
    for (let at = startedAt - 2000; at < startedAt + 62_000; at += 100 + random() * 400) {
      samples.push({
        at,
        queueDepth: Math.floor(random() * 1000),
        streamLength: Math.floor(random() * 50),
      });
    }
    const counters: CounterSample[] = [];
    let batches = 0;
    let commands = 0;
    let collections = 0;
    for (let at = startedAt - 1500; at < startedAt + 63_000; at += 700 + random() * 900) {
      batches += Math.floor(random() * 40);
      commands += Math.floor(random() * 4000);
      collections += Math.floor(random() * 3);
      counters.push({
        at,
        batches,
        batchedCommands: commands,
        collections: { bench: collections },
      });
    }
    const points: TimelinePoint[] = [];
    for (let t = 0.5 + random(); t < 60; t += 0.3 + random() * 1.4) {
      points.push({ tSeconds: t, commandsPerSecond: 1, p50Ms: 1, p99Ms: 1, maxMs: 1 });
    }
    expect(points.length).toBeGreaterThan(40);
    expect(foldTimeline(points, startedAt, samples, counters)).toEqual(
      reference(points, startedAt, samples, counters),
    );
  });
});
