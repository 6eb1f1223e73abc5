/**
 * The soak's verdicts from its samples: each series' growth per command while the dedup
 * window fills, whether it is flat once the window is crossed (by linear fit), when memory and
 * disk would run out at that rate, p50/p99 per minute, and the durability wait around each
 * AOF rewrite.
 */
import type { TimelinePoint } from "./series-recorder";
import type { SoakSample } from "./soak-sampler";
import { allStalls, worstStallBetween } from "./soak-stalls";

/** Flat means less than this growth over the judged span (issue #27's target). */
export const flatGrowthPercent = 5;
/**
 * A fitted growth counts only when it is this many standard errors above zero: a series that
 * scatters (a heap's floor, an AOF's size at each rewrite) fits a slope from its noise alone.
 * Samples close in time are correlated, so the error is underestimated and the test leans
 * towards calling a series growing, not flat.
 */
export const growthStandardErrors = 2;
/**
 * A backlog (the event stream, the command queue) starts near zero, so a percentage says
 * nothing: it is bounded when its fitted growth over the judged span stays under this many
 * seconds of the offered commands (for the stream, of five events a command).
 */
export const backlogGrowthSeconds = 1;
/** The judged span: the last ten minutes, or what follows the window when that is shorter. */
export const judgedSpanSeconds = 600;

export interface SeriesVerdict {
  name: string;
  unit: "bytes" | "keys" | "entries" | "messages";
  first: number;
  last: number;
  /** Growth per command while the window fills (from 60 s to the window's end). */
  perCommandWhileFilling: number | undefined;
  /** Growth over the judged span, by linear fit, in % of the fitted start. */
  growthPercent: number | undefined;
  /** The standard error of growthPercent, from the fit's residuals. */
  growthStdErrPercent: number | undefined;
  /** Bytes (or keys) per second over the judged span, by linear fit. */
  slopePerSecond: number | undefined;
  bounded: boolean | undefined;
}

/**
 * Each minute's lowest value, at the minute's first sample time: the floor a heap returns to
 * after each collection, or an AOF after each rewrite. A sample lands anywhere in those
 * cycles, so a fit over every sample follows the sawtooth; a leak raises the floor.
 */
export function perMinuteFloor(points: readonly [number, number][]): [number, number][] {
  const floors = new Map<number, [number, number]>();
  for (const [t, y] of points) {
    const minute = Math.floor(t / 60);
    const floor = floors.get(minute);
    if (floor === undefined) floors.set(minute, [t, y]);
    else if (y < floor[1]) floor[1] = y;
  }
  return [...floors.values()];
}

/**
 * The points where a step series takes a new value: an AOF's size after its last rewrite
 * changes once a rewrite, and a fit over every sample would weight each size by how long it
 * lasted.
 */
export function stepPoints(points: readonly [number, number][]): [number, number][] {
  return points.filter(([, y], i) => i === 0 || y !== points[i - 1]![1]);
}

/** Least-squares slope, intercept and the slope's standard error, of y over x. */
export function linearFit(points: readonly [number, number][]): {
  slope: number;
  at0: number;
  slopeStdErr: number;
} {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  const slope = sxx === 0 ? 0 : sxy / sxx;
  const at0 = my - slope * mx;
  const residuals = points.reduce((s, [x, y]) => s + (y - at0 - slope * x) ** 2, 0);
  const slopeStdErr = n > 2 && sxx > 0 ? Math.sqrt(residuals / (n - 2) / sxx) : 0;
  return { slope, at0, slopeStdErr };
}

interface Spans {
  fill: [number, number];
  judged: [number, number] | undefined;
}

/** Where to fit: the window filling, and the judged span once the window is crossed. */
export function spansOf(windowSeconds: number, durationSeconds: number): Spans {
  const fill: [number, number] = [Math.min(60, windowSeconds / 4), windowSeconds];
  // A minute past the window: the first commands' keys have expired by then.
  const from = Math.max(windowSeconds + 60, durationSeconds - judgedSpanSeconds);
  const judged: [number, number] | undefined =
    durationSeconds - from >= 120 ? [from, durationSeconds] : undefined;
  return { fill, judged };
}

/** Fewer points than this in the judged span (a step series with few rewrites): not judged. */
export const minimumJudgedPoints = 4;

export function judgeSeries(
  name: string,
  unit: SeriesVerdict["unit"],
  points: readonly [number, number][],
  rate: number,
  spans: Spans,
  /** For a backlog: the growth it may have over the span (see backlogGrowthSeconds). */
  backlogAllowance?: number,
): SeriesVerdict {
  const within = ([from, to]: [number, number]) => points.filter(([t]) => t >= from && t <= to);
  const fill = within(spans.fill);
  const judged = spans.judged === undefined ? [] : within(spans.judged);
  const verdict: SeriesVerdict = {
    name,
    unit,
    first: points[0]?.[1] ?? 0,
    last: points[points.length - 1]?.[1] ?? 0,
    perCommandWhileFilling: fill.length >= 3 ? linearFit(fill).slope / rate : undefined,
    growthPercent: undefined,
    growthStdErrPercent: undefined,
    slopePerSecond: undefined,
    bounded: undefined,
  };
  if (spans.judged !== undefined && judged.length >= minimumJudgedPoints) {
    const { slope, at0, slopeStdErr } = linearFit(judged);
    const [from, to] = spans.judged;
    const start = Math.max(1, at0 + slope * from);
    const percentOfStart = (perSecond: number) => ((perSecond * (to - from)) / start) * 100;
    verdict.slopePerSecond = slope;
    verdict.growthPercent = percentOfStart(slope);
    verdict.growthStdErrPercent = percentOfStart(slopeStdErr);
    const beyondNoise = slope > growthStandardErrors * slopeStdErr;
    verdict.bounded =
      !beyondNoise ||
      (backlogAllowance === undefined
        ? verdict.growthPercent < flatGrowthPercent
        : slope * (to - from) < backlogAllowance);
  }
  return verdict;
}

/** Per minute: the median of the per-second p50s and the largest per-second p99. */
export function perMinute(timeline: readonly TimelinePoint[]) {
  const minutes = new Map<number, TimelinePoint[]>();
  for (const point of timeline) {
    if (point.commandsPerSecond === 0) continue;
    const minute = Math.floor((point.tSeconds - 1) / 60);
    minutes.set(minute, [...(minutes.get(minute) ?? []), point]);
  }
  return [...minutes].map(([minute, points]) => {
    const p50s = points.map((p) => p.p50Ms).sort((a, b) => a - b);
    return {
      minute: minute + 1,
      commandsPerSecond: Math.round(
        points.reduce((s, p) => s + p.commandsPerSecond, 0) / points.length,
      ),
      p50Ms: p50s[Math.floor(p50s.length / 2)] ?? 0,
      maxSecondP99Ms: Math.max(...points.map((p) => p.p99Ms)),
    };
  });
}

/** The smallest bucket bound under which `q` of the counts fall, from cumulative buckets. */
export function quantileBound(buckets: readonly [number, number][], q: number): number {
  const total = buckets[buckets.length - 1]?.[1] ?? 0;
  if (total === 0) return 0;
  for (const [bound, count] of buckets) if (count >= q * total) return bound;
  return Number.POSITIVE_INFINITY;
}

/** Cumulative buckets of `later` minus those of `earlier`: the waits between two samples. */
export function bucketsBetween(earlier: SoakSample, later: SoakSample): [number, number][] {
  const before = new Map(earlier.durabilityWait);
  return later.durabilityWait.map(([bound, count]) => [bound, count - (before.get(bound) ?? 0)]);
}

export interface RewriteWindow {
  server: string;
  /** The sample interval in which the rewrite count rose, seconds since the load began. */
  fromS: number;
  toS: number;
  /** p99.9 of the durability waits from a sample before to a sample after: a bucket bound. */
  durabilityWaitP999Ms: number;
  waits: number;
  /** How long the rewrite's fork froze the server (`latest_fork_usec` after it), ms. */
  forkMs: number;
  /** The window overlaps a replica's restart and resync, which stall waits by themselves. */
  duringReplicaRestart: boolean;
  /** The window the wait is cut from: one sample before the interval to one after it. */
  spanFromS: number;
  spanToS: number;
  /** The longest Valkey main-thread stall in that window (latency monitor), if any. */
  worstStall: { server: string; event: string; ms: number } | undefined;
}

/** Seconds since the load began: from a replica's SIGKILL to some time after it is online. */
export type Span = readonly [from: number, to: number];

/**
 * A replica restart's span: from its SIGKILL until the command queue has caught up after it
 * is online again (under a tenth of a second of the offered rate), or the run's end.
 */
export function restartSpan(
  samples: readonly SoakSample[],
  killedAtS: number,
  onlineAgainAtS: number | undefined,
  ratePerSecond: number,
): Span {
  const online = onlineAgainAtS ?? Number.POSITIVE_INFINITY;
  const caughtUp = samples.find((s) => s.t >= online && s.queueDepth < ratePerSecond / 10);
  return [killedAtS, caughtUp?.t ?? samples[samples.length - 1]?.t ?? online];
}

const overlaps = (span: Span | undefined, from: number, to: number) =>
  span !== undefined && from <= span[1] && to >= span[0];

/** The servers whose rewrite count rose between sample i - 1 and sample i. */
function rewrittenAt(samples: readonly SoakSample[], i: number): string[] {
  return Object.keys(samples[i]!.servers).filter(
    (server) =>
      (samples[i]!.servers[server]?.rewrites ?? 0) >
      (samples[i - 1]!.servers[server]?.rewrites ?? 0),
  );
}

/** The waits from the sample before interval i's start to the sample after its end. */
function around(samples: readonly SoakSample[], i: number): [number, number][] {
  return bucketsBetween(
    samples[Math.max(0, i - 2)]!,
    samples[Math.min(samples.length - 1, i + 1)]!,
  );
}

/**
 * Each AOF rewrite's moment and the durability wait's p99.9 around it (one sample each side),
 * with its fork time, and whether it fell in `restart` (a replica's restart and resync).
 */
export function rewriteWindows(samples: readonly SoakSample[], restart?: Span): RewriteWindow[] {
  const windows: RewriteWindow[] = [];
  const stalls = allStalls(samples);
  for (let i = 1; i < samples.length; i++) {
    for (const server of rewrittenAt(samples, i)) {
      const waits = around(samples, i);
      const fromS = samples[i - 1]!.t;
      const toS = samples[i]!.t;
      const spanFromS = samples[Math.max(0, i - 2)]!.t;
      const spanToS = samples[Math.min(samples.length - 1, i + 1)]!.t;
      const stall = worstStallBetween(stalls, spanFromS, spanToS);
      windows.push({
        server,
        fromS,
        toS,
        durabilityWaitP999Ms: quantileBound(waits, 0.999) * 1000,
        waits: waits[waits.length - 1]?.[1] ?? 0,
        forkMs: (samples[i]!.servers[server]?.forkUsec ?? 0) / 1000,
        duringReplicaRestart: overlaps(restart, spanFromS, spanToS),
        spanFromS,
        spanToS,
        worstStall: stall && { server: stall.server, event: stall.event, ms: stall.ms },
      });
    }
  }
  return windows;
}

/**
 * The durability wait's p99.9 in every window as wide as a rewrite's (three sample intervals)
 * that holds no rewrite on any server and no replica restart: the median and the worst. It
 * tells a tail the rewrites cause from the tail the machine has without them.
 */
export function waitAwayFromRewrites(
  samples: readonly SoakSample[],
  restart?: Span,
): { windows: number; medianP999Ms: number | undefined; worstP999Ms: number | undefined } {
  const quiet: number[] = [];
  for (let i = 2; i + 1 < samples.length; i++) {
    const spanned = [i - 1, i, i + 1];
    if (spanned.some((j) => rewrittenAt(samples, j).length > 0)) continue;
    if (overlaps(restart, samples[i - 2]!.t, samples[i + 1]!.t)) continue;
    const waits = around(samples, i);
    if ((waits[waits.length - 1]?.[1] ?? 0) === 0) continue;
    quiet.push(quantileBound(waits, 0.999) * 1000);
  }
  quiet.sort((a, b) => a - b);
  return {
    windows: quiet.length,
    medianP999Ms: quiet[Math.floor(quiet.length / 2)],
    worstP999Ms: quiet[quiet.length - 1],
  };
}
