/**
 * The soak's verdicts: a linear fit, the spans it judges, flat and growing series, bucket
 * quantiles between two samples, AOF rewrite windows and per-minute latency.
 */
import { describe, expect, test } from "bun:test";
import {
  bucketsBetween,
  judgeSeries,
  linearFit,
  perMinute,
  perMinuteFloor,
  quantileBound,
  restartSpan,
  rewriteWindows,
  spansOf,
  stepPoints,
  waitAwayFromRewrites,
} from "../../bench/soak-analysis";
import { seriesVerdicts } from "../../bench/soak-report";
import type { SoakSample } from "../../bench/soak-sampler";
import { histogramBuckets } from "../../bench/soak-sampler";
import { allStalls, stallTable } from "../../bench/soak-stalls";

function sample(t: number, rewrites: number, waits: [number, number][]): SoakSample {
  return {
    t,
    servers: {
      primary: {
        usedMemory: 0,
        keys: 0,
        expiringKeys: 0,
        aofBytes: 0,
        aofBaseBytes: 0,
        rewrites,
        forkUsec: 12_000,
      },
    },
    streamLength: 0,
    queueDepth: 0,
    rssBytes: {},
    heapBytes: {},
    durabilityTimeouts: 0,
    durabilityWait: waits,
    stalls: [],
    restingOrders: 0,
  };
}

describe("soak analysis", () => {
  test("a linear fit recovers slope and intercept", () => {
    const { slope, at0 } = linearFit([
      [0, 10],
      [1, 12],
      [2, 14],
    ]);
    expect(slope).toBeCloseTo(2);
    expect(at0).toBeCloseTo(10);
  });

  test("the judged span is the last ten minutes past the window, or none when too short", () => {
    expect(spansOf(300, 1800)).toEqual({ fill: [60, 300], judged: [1200, 1800] });
    expect(spansOf(60, 260).judged).toEqual([120, 260]);
    expect(spansOf(60, 150).judged).toBeUndefined();
    expect(spansOf(3600, 1800).judged).toBeUndefined();
  });

  test("a series that fills then stays flat is bounded; one that keeps growing is not", () => {
    const spans = spansOf(100, 600);
    const points = (after: (t: number) => number): [number, number][] =>
      Array.from({ length: 121 }, (_, i) => {
        const t = i * 5;
        return [t, t <= 100 ? 1000 + t * 450 : after(t)];
      });
    const flat = judgeSeries(
      "flat",
      "bytes",
      points(() => 46_000),
      1,
      spans,
    );
    expect(flat.perCommandWhileFilling).toBeCloseTo(450);
    expect(flat.bounded).toBe(true);
    const growing = judgeSeries(
      "growing",
      "bytes",
      points((t) => 1000 + t * 450),
      1,
      spans,
    );
    expect(growing.bounded).toBe(false);
    expect(growing.growthPercent).toBeGreaterThan(5);
    const unjudged = judgeSeries(
      "short",
      "bytes",
      points(() => 0),
      1,
      spansOf(100, 150),
    );
    expect(unjudged.bounded).toBeUndefined();
    // A backlog is judged by count: a few entries of noise pass, a second of load does not.
    const backlog = (last: number): [number, number][] =>
      Array.from({ length: 121 }, (_, i) => [
        i * 5,
        i * 5 >= 160 ? ((i * 5 - 160) / 440) * last : 0,
      ]);
    expect(judgeSeries("queue", "messages", backlog(50), 100, spans, 100).bounded).toBe(true);
    expect(judgeSeries("queue", "messages", backlog(500), 100, spans, 100).bounded).toBe(false);
  });

  test("a sawtooth is judged by its per-minute floor: flat when the floor is", () => {
    const sawtooth: [number, number][] = Array.from({ length: 240 }, (_, i) => [
      i * 5,
      16 + ((i * 7) % 12) * 2,
    ]);
    const floors = perMinuteFloor(sawtooth);
    expect(floors).toHaveLength(20);
    expect(floors.every(([, y]) => y === 16)).toBe(true);
    const spans = spansOf(300, 1200);
    expect(judgeSeries("heap", "bytes", floors, 1, spans).bounded).toBe(true);
    const leaking = sawtooth.map(([t, y]): [number, number] => [t, y + t / 10]);
    expect(judgeSeries("heap", "bytes", perMinuteFloor(leaking), 1, spans).bounded).toBe(false);
  });

  test("a growth the noise explains is flat; the same growth without the noise is not", () => {
    const spans = spansOf(300, 1800);
    // Nine per-minute floors of the outbox heap in a 2,000/s soak's last ten minutes (MB; they
    // fit +4.5 %, standard error 27 %), and a tenth, made up, so that the fit passes the 5 % bound.
    const floors = [10.02, 7.88, 10.54, 9.53, 7.48, 12.95, 11.21, 7.5, 9.76, 10.1];
    const scattered = floors.map((y, i): [number, number] => [1200 + i * 60, y * 1e6]);
    const noisy = judgeSeries("outbox heap used", "bytes", scattered, 2000, spans);
    expect(noisy.growthPercent).toBeGreaterThan(5);
    expect(noisy.bounded).toBe(true);
    const steady = scattered.map(([t]): [number, number] => [t, 9e6 * (1 + (t - 1200) / 6000)]);
    const leak = judgeSeries("leak", "bytes", steady, 2000, spans);
    expect(leak.growthStdErrPercent).toBeCloseTo(0);
    expect(leak.bounded).toBe(false);
  });

  test("RabbitMQ's RSS is judged by its per-minute floor, other processes' by every sample", () => {
    // A 45 s sawtooth (its WAL's memory table filling, then freed) over a flat floor, sampled
    // every 5 s, whose teeth grow taller in the last five minutes.
    const tooth = (t: number) => 200e6 + ((t % 45) / 45) * (t > 1500 ? 240e6 : 80e6);
    const samples = Array.from({ length: 361 }, (_, i) => {
      const at = sample(i * 5, 0, []);
      at.rssBytes = { rabbitmq: tooth(i * 5), conductor: tooth(i * 5) };
      return at;
    });
    const verdicts = seriesVerdicts(samples, 2000, spansOf(300, 1800));
    const verdict = (name: string) => verdicts.find((v) => v.name === name)!;
    expect(verdict("rabbitmq RSS").bounded).toBe(true);
    expect(verdict("conductor RSS").bounded).toBe(false);
  });

  test("a step series is judged by its value at each step", () => {
    const steps: [number, number][] = [
      [0, 5],
      [5, 5],
      [10, 7],
      [15, 7],
      [20, 7],
      [25, 6],
    ];
    expect(stepPoints(steps)).toEqual([
      [0, 5],
      [10, 7],
      [25, 6],
    ]);
  });

  test("bucket quantiles between two samples, and each rewrite's window", () => {
    const before: [number, number][] = [
      [0.01, 100],
      [0.05, 100],
      [Number.POSITIVE_INFINITY, 100],
    ];
    const after: [number, number][] = [
      [0.01, 1100],
      [0.05, 1198],
      [Number.POSITIVE_INFINITY, 1200],
    ];
    const between = bucketsBetween(sample(0, 0, before), sample(5, 0, after));
    expect(between).toEqual([
      [0.01, 1000],
      [0.05, 1098],
      [Number.POSITIVE_INFINITY, 1100],
    ]);
    expect(quantileBound(between, 0.5)).toBe(0.01);
    expect(quantileBound(between, 0.999)).toBe(Number.POSITIVE_INFINITY);
    const windows = rewriteWindows([
      sample(0, 0, before),
      sample(5, 1, after),
      sample(10, 1, after),
    ]);
    expect(windows).toHaveLength(1);
    expect(windows[0]).toMatchObject({ server: "primary", fromS: 0, toS: 5, waits: 1100 });
    expect(windows[0]!.worstStall).toBeUndefined();
  });

  test("a rewrite's window names its longest Valkey stall; the table splits them", () => {
    const stall = (t: number, event: string, ms: number) => ({ server: "replica", event, t, ms });
    const samples = [
      sample(0, 0, []),
      { ...sample(5, 0, []), stalls: [stall(3, "aof-fsync-always", 12)] },
      { ...sample(10, 1, []), stalls: [stall(8, "fork", 40), stall(9, "aof-fsync-always", 30)] },
      sample(15, 1, []),
      sample(20, 1, []),
      { ...sample(25, 1, []), stalls: [stall(24, "aof-fsync-always", 7)] },
    ];
    const windows = rewriteWindows(samples);
    expect(windows).toHaveLength(1);
    expect(windows[0]).toMatchObject({ spanFromS: 0, spanToS: 15 });
    expect(windows[0]!.worstStall).toEqual({ server: "replica", event: "fork", ms: 40 });
    const table = stallTable(allStalls(samples), windows);
    expect(table.rows).toEqual([
      {
        server: "replica",
        event: "aof-fsync-always",
        aroundRewrites: { count: 2, maxMs: 30 },
        awayFromRewrites: { count: 1, maxMs: 7 },
      },
      {
        server: "replica",
        event: "fork",
        aroundRewrites: { count: 1, maxMs: 40 },
        awayFromRewrites: { count: 0, maxMs: 0 },
      },
    ]);
  });

  test("rewrites in a replica restart are marked; quiet windows give the tail without them", () => {
    // Cumulative waits: 1,000 fast ones every interval, and 10 slow ones in interval 6 only.
    const waits = (i: number): [number, number][] => [
      [0.01, 1000 * i],
      [0.25, 1000 * i + (i >= 6 ? 10 : 0)],
      [Number.POSITIVE_INFINITY, 1000 * i + (i >= 6 ? 10 : 0)],
    ];
    const samples = Array.from({ length: 12 }, (_, i) => ({
      ...sample(i * 5, i >= 6 ? 1 : 0, waits(i)),
      queueDepth: i >= 8 && i <= 9 ? 5000 : 0,
    }));
    // The replica was killed at 40 s and online at 45 s; the queue is caught up at 50 s.
    const span = restartSpan(samples, 40, 45, 2000);
    expect(span).toEqual([40, 50]);
    const windows = rewriteWindows(samples, span);
    expect(windows).toHaveLength(1);
    expect(windows[0]).toMatchObject({
      fromS: 25,
      toS: 30,
      forkMs: 12,
      duringReplicaRestart: false,
    });
    expect(windows[0]!.durabilityWaitP999Ms).toBe(250);
    expect(rewriteWindows(samples, [20, 30])[0]!.duringReplicaRestart).toBe(true);
    // The windows over 0–15, 5–20 and 10–25 s hold neither the rewrite nor the restart.
    const away = waitAwayFromRewrites(samples, span);
    expect(away).toEqual({ windows: 3, medianP999Ms: 10, worstP999Ms: 10 });
  });

  test("Prometheus bucket lines are read by name", () => {
    const text = [
      'matching_stage_durability_wait_seconds_bucket{partition="0",le="0.005"} 7',
      'matching_stage_durability_wait_seconds_bucket{partition="0",le="+Inf"} 9',
      'matching_other_bucket{le="1"} 3',
    ].join("\n");
    expect(histogramBuckets(text, "matching_stage_durability_wait_seconds")).toEqual([
      [0.005, 7],
      [Number.POSITIVE_INFINITY, 9],
    ]);
  });

  test("per minute: the median second's p50 and the worst second's p99", () => {
    const timeline = Array.from({ length: 120 }, (_, i) => ({
      tSeconds: i + 1,
      commandsPerSecond: 100,
      p50Ms: i < 60 ? 2 : 4,
      p99Ms: i === 30 ? 50 : 10,
      maxMs: 60,
    }));
    expect(perMinute(timeline)).toEqual([
      { minute: 1, commandsPerSecond: 100, p50Ms: 2, maxSecondP99Ms: 50 },
      { minute: 2, commandsPerSecond: 100, p50Ms: 4, maxSecondP99Ms: 10 },
    ]);
  });
});
