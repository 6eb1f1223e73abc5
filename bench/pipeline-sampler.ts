/**
 * What a pipeline bench samples while it runs: the command queue's depth, the event stream's
 * length and the replica's presence four times a second, and once a second the services'
 * counters (batches, garbage collections), folded into the per-second timeline.
 */
import type { Channel } from "amqplib";
import { gcMetricName } from "../src/infra/gc-observer";
import { connectedReplicas, type Valkey } from "../src/infra/valkey/client";
import type { TimelinePoint } from "./series-recorder";
import { fetchMetrics, metricNumber } from "./services";

export interface QueueSample {
  /** performance.now() when taken: the timed run's start is not known before it opens. */
  at: number;
  queueDepth: number;
  streamLength: number;
}

export interface CounterSample {
  at: number;
  batches: number;
  batchedCommands: number;
  collections: Record<string, number>;
}

export interface SamplerSources {
  probe: Channel;
  queue: string;
  valkey: Valkey;
  streamKey: string;
  services: { name: string; url: string }[];
  /** The bench process's own collections so far. */
  benchCollections: () => number;
}

export class PipelineSampler {
  readonly samples: QueueSample[] = [];
  private readonly counters: CounterSample[] = [];
  minReplicas = Number.POSITIVE_INFINITY;
  replicaSamples = 0;
  private running = true;
  private readonly loop: Promise<void>;

  /** Samples from now until stop(). */
  constructor(
    private readonly sources: SamplerSources,
    /** Called at every sample: the rewrite watch notes rewrites in flight. */
    private readonly onSample: () => Promise<void> = async () => undefined,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    const { probe, queue, valkey, streamKey } = this.sources;
    for (let tick = 0; this.running; tick++) {
      try {
        const [depth, xlen, replicas] = await Promise.all([
          probe.checkQueue(queue),
          valkey.xlen(streamKey),
          connectedReplicas(valkey),
          this.onSample(),
          tick % 4 === 0 ? this.sampleCounters() : undefined,
        ]);
        this.samples.push({
          at: performance.now(),
          queueDepth: depth.messageCount,
          streamLength: xlen,
        });
        this.minReplicas = Math.min(this.minReplicas, replicas);
        this.replicaSamples++;
      } catch {
        // A failed sample is a gap, not a failure of the run.
      }
      await Bun.sleep(250);
    }
  }

  private async sampleCounters(): Promise<void> {
    const at = performance.now();
    const metrics = await Promise.all(this.sources.services.map((s) => fetchMetrics(s.url)));
    const conductor = metrics[0]!;
    const batch = conductor.matching_batch_size as { count?: number; sum?: number } | undefined;
    const collections: Record<string, number> = { bench: this.sources.benchCollections() };
    this.sources.services.forEach((s, i) => {
      collections[s.name] = metricNumber(metrics[i]!, gcMetricName);
    });
    this.counters.push({
      at,
      batches: batch?.count ?? Number.NaN,
      batchedCommands: batch?.sum ?? Number.NaN,
      collections,
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    // The counters' last reading closes the last interval, however short the run was.
    await this.sampleCounters().catch(() => undefined);
  }

  /**
   * The recorder's points with each interval's deepest queue, longest stream and counters;
   * `startedAt` is the timed run's start (performance.now()), the points' time zero.
   */
  timeline<P extends TimelinePoint>(points: readonly P[], startedAt: number): P[] {
    return foldTimeline(points, startedAt, this.samples, this.counters);
  }
}

/**
 * The recorder's points with each interval's deepest queue, longest stream and counters
 * (PipelineSampler.timeline), from samples and counters in time order.
 */
export function foldTimeline<P extends TimelinePoint>(
  points: readonly P[],
  startedAt: number,
  samples: readonly QueueSample[],
  counters: readonly CounterSample[],
): P[] {
  const t = (at: number) => (at - startedAt) / 1000;
  // Samples, counters and points are all in time order: one pass with cursors, so that an
  // hour's run (3,600 points, 14,400 samples) is not a product of the two.
  let next = 0;
  let start = 0;
  let end = 0;
  return points.map((point, k) => {
    // Each point covers [previous point, tSeconds).
    const from = k === 0 ? 0 : points[k - 1]!.tSeconds;
    while (next < samples.length && t(samples[next]!.at) < from) next++;
    let queueDepth = 0;
    let streamLength = 0;
    for (; next < samples.length && t(samples[next]!.at) < point.tSeconds; next++) {
      queueDepth = Math.max(queueDepth, samples[next]!.queueDepth);
      streamLength = Math.max(streamLength, samples[next]!.streamLength);
    }
    // The counters nearest outside the interval: the last at or before its start (or the
    // first counter) and the first at or after its end (or the last counter).
    const fromAt = startedAt + from * 1000;
    const toAt = startedAt + point.tSeconds * 1000;
    while (start + 1 < counters.length && counters[start + 1]!.at <= fromAt) start++;
    while (end < counters.length - 1 && counters[end]!.at < toAt) end++;
    return {
      ...point,
      queueDepth,
      streamLength,
      ...countersBetween(counters[start], counters[end]),
    };
  });
}

/** Mean batch and collections per second between two counter samples. */
function countersBetween(
  start: CounterSample | undefined,
  end: CounterSample | undefined,
): Partial<TimelinePoint> {
  if (start === undefined || end === undefined || end.at <= start.at) return {};
  const batches = end.batches - start.batches;
  const span = (end.at - start.at) / 1000;
  const collections: Record<string, number> = {};
  for (const name of Object.keys(end.collections)) {
    const count = (end.collections[name] ?? Number.NaN) - (start.collections[name] ?? Number.NaN);
    if (Number.isFinite(count)) collections[name] = Math.round((count / span) * 10) / 10;
  }
  return {
    ...(batches > 0 ? { batchSize: (end.batchedCommands - start.batchedCommands) / batches } : {}),
    collections,
  };
}
