/**
 * Measures a bench run's two series while it runs: per-interval throughput and latency, and
 * a log-bucketed latency histogram of the whole run. The HTML report only draws them.
 */
import { LatencyHistogram } from "./histogram";

export interface TimelinePoint {
  /** End of the interval, in seconds since the measured run started. */
  tSeconds: number;
  commandsPerSecond: number;
  /** Latencies of the commands completed in the interval; 0 when none completed. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Sampled by the pipeline benches: the most seen in the interval. */
  queueDepth?: number;
  streamLength?: number;
  /** The conductor's mean batch in the interval (commands per commit). */
  batchSize?: number;
  /** Garbage collections observed in the interval, by process. */
  collections?: Record<string, number>;
}

/** A stretch of the run to shade on its time charts: an AOF rewrite, a restart. */
export interface Span {
  label: string;
  /** Which one, shown on hover: the server that rewrote. */
  detail?: string;
  fromSeconds: number;
  toSeconds: number;
}

export interface HistogramBucket {
  /** Inclusive upper edge; the lower edge is the previous bucket's upper edge. */
  upperMs: number;
  count: number;
}

export interface ReportSeries {
  timeline: TimelinePoint[];
  histogram: HistogramBucket[];
  spans?: Span[];
}

/**
 * Collects the two series a page needs while a bench runs: per-interval throughput and
 * latency (a fresh histogram per interval, so a stall shows instead of averaging away)
 * and a log-bucketed latency histogram of the whole run.
 */
export class SeriesRecorder {
  private readonly intervalNs: number;
  private readonly bucketsPerDecade: number;
  private startNs: number | undefined;
  private intervalEndNs = 0;
  private readonly window = new LatencyHistogram();
  private readonly timeline: TimelinePoint[] = [];
  private readonly buckets = new Map<number, number>();
  private lastNs = 0;

  constructor({ intervalMs = 1000, bucketsPerDecade = 10 } = {}) {
    this.intervalNs = intervalMs * 1e6;
    this.bucketsPerDecade = bucketsPerDecade;
  }

  /** Marks the start of the measured run; the first record() does it when not called. */
  start(atNs: number = Bun.nanoseconds()): void {
    this.startNs = atNs;
    this.intervalEndNs = atNs + this.intervalNs;
    this.lastNs = atNs;
  }

  /** Records one completed command's latency, completed at `atNs` (Bun.nanoseconds clock). */
  record(latencyNs: number, atNs: number = Bun.nanoseconds()): void {
    if (this.startNs === undefined) this.start(atNs - latencyNs);
    // Intervals with no completions still get a point: a stall must show as a drop to zero.
    while (atNs >= this.intervalEndNs) this.flush(this.intervalNs);
    this.window.record(latencyNs);
    this.lastNs = Math.max(this.lastNs, atNs);
    const ms = Math.max(latencyNs / 1e6, 1e-6);
    const index = Math.floor(Math.log10(ms) * this.bucketsPerDecade);
    this.buckets.set(index, (this.buckets.get(index) ?? 0) + 1);
  }

  series(): ReportSeries {
    const timeline = [...this.timeline];
    const startNs = this.startNs;
    if (startNs !== undefined && this.window.count > 0) {
      // The last, partial interval is scaled by its real length, not the nominal one. One
      // shorter than half an interval is left out: a few completions over a sliver of a
      // second would draw a spike the run never had (its commands stay in the histogram),
      // unless the run was that short.
      const partialNs = this.lastNs - (this.intervalEndNs - this.intervalNs);
      if (partialNs >= this.intervalNs / 2 || (partialNs > 0 && timeline.length === 0))
        timeline.push(this.point(partialNs, (this.lastNs - startNs) / 1e9));
    }
    const indexes = [...this.buckets.keys()].sort((a, b) => a - b);
    const histogram: HistogramBucket[] = [];
    if (indexes.length > 0) {
      for (let i = indexes[0]!; i <= indexes[indexes.length - 1]!; i++) {
        histogram.push({
          upperMs: 10 ** ((i + 1) / this.bucketsPerDecade),
          count: this.buckets.get(i) ?? 0,
        });
      }
    }
    return { timeline, histogram };
  }

  private flush(lengthNs: number): void {
    const startNs = this.startNs ?? 0;
    this.timeline.push(this.point(lengthNs, (this.intervalEndNs - startNs) / 1e9));
    this.window.reset();
    this.intervalEndNs += this.intervalNs;
  }

  private point(lengthNs: number, tSeconds: number): TimelinePoint {
    const p = this.window.percentilesMs();
    return {
      tSeconds,
      commandsPerSecond: this.window.count / (lengthNs / 1e9),
      p50Ms: p.p50,
      p99Ms: p.p99,
      maxMs: p.max,
    };
  }
}
