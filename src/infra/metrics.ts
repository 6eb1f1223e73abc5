/**
 * A small metrics registry: counters, gauges and log-linear histograms, rendered as
 * the contract's flat JSON object or as Prometheus text exposition.
 */

type Labels = Record<string, string>;

interface Series {
  name: string;
  help: string;
  kind: "counter" | "gauge" | "histogram";
}

// Histogram buckets in seconds, from 50 µs to 30 s: wide enough for a WAITAOF stall.
const defaultBuckets = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
  5, 10, 30,
];

/**
 * Ten buckets a decade (neighbours 1.25–1.28 apart), 10 µs to 30 s, 66 bounds, for a latency
 * whose percentiles are read off the histogram (the outbox's confirm latency in the drain
 * bench): a quantile is then at most 28 % above the true value, where the default series can
 * read 2.5 times it.
 */
export const fineBuckets: readonly number[] = (() => {
  const steps = [1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8];
  const bounds: number[] = [];
  for (let exponent = -5; exponent <= 0; exponent++) {
    for (const step of steps) bounds.push(Number((step * 10 ** exponent).toPrecision(3)));
  }
  bounds.push(10, 12.5, 16, 20, 25, 30);
  return bounds;
})();

export class Counter implements Series {
  readonly kind = "counter" as const;
  value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(by = 1): void {
    this.value += by;
  }
}

export class Gauge implements Series {
  readonly kind = "gauge" as const;
  value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly read?: () => number,
  ) {}
  set(value: number): void {
    this.value = value;
  }
  current(): number {
    return this.read ? this.read() : this.value;
  }
}

export class Histogram implements Series {
  readonly kind = "histogram" as const;
  readonly counts: number[];
  count = 0;
  sum = 0;
  max = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[] = defaultBuckets,
  ) {
    this.counts = new Array(buckets.length).fill(0);
  }
  observe(seconds: number): void {
    this.count++;
    this.sum += seconds;
    if (seconds > this.max) this.max = seconds;
    // Binary search for the first bound at or above the value: the fine series has 66 bounds.
    let low = 0;
    let high = this.buckets.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (seconds <= this.buckets[middle]!) high = middle;
      else low = middle + 1;
    }
    // Above the last bound: counted only in count/sum/max (the +Inf bucket), as before.
    if (low < this.buckets.length) this.counts[low]!++;
  }
  /** Upper bucket bound at or above the quantile: coarse, but never understated. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const target = q * this.count;
    let seen = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      seen += this.counts[i]!;
      if (seen >= target) return Math.min(this.buckets[i]!, this.max);
    }
    return this.max;
  }
}

type Metric = Counter | Gauge | Histogram;

export class MetricsRegistry {
  private readonly metrics = new Map<string, Metric>();
  private readonly info = new Map<string, Labels>();

  constructor(private readonly constantLabels: Labels = {}) {}

  counter(name: string, help: string): Counter {
    return this.add(new Counter(name, help));
  }
  gauge(name: string, help: string, read?: () => number): Gauge {
    return this.add(new Gauge(name, help, read));
  }
  histogram(name: string, help: string, buckets?: readonly number[]): Histogram {
    return this.add(new Histogram(name, help, buckets));
  }
  /** An info metric (value 1) whose labels carry facts such as the durability policy. */
  setInfo(name: string, labels: Labels): void {
    this.info.set(name, labels);
  }

  private add<M extends Metric>(metric: M): M {
    if (this.metrics.has(metric.name)) throw new Error(`metric ${metric.name} registered twice`);
    this.metrics.set(metric.name, metric);
    return metric;
  }

  toJson(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [name, labels] of this.info) out[name] = labels;
    for (const metric of this.metrics.values()) {
      if (metric.kind === "histogram") {
        out[metric.name] = {
          count: metric.count,
          sum: round(metric.sum),
          p50: metric.quantile(0.5),
          p95: metric.quantile(0.95),
          p99: metric.quantile(0.99),
          p999: metric.quantile(0.999),
          max: round(metric.max),
        };
      } else {
        out[metric.name] = metric.kind === "gauge" ? metric.current() : metric.value;
      }
    }
    return out;
  }

  toPrometheus(): string {
    const lines: string[] = [];
    const base = this.constantLabels;
    for (const [name, labels] of this.info) {
      lines.push(`# TYPE ${name} gauge`, `${name}${formatLabels({ ...base, ...labels })} 1`);
    }
    for (const metric of this.metrics.values()) {
      lines.push(`# HELP ${metric.name} ${metric.help}`, `# TYPE ${metric.name} ${metric.kind}`);
      if (metric.kind === "histogram") {
        let cumulative = 0;
        metric.buckets.forEach((bound, i) => {
          cumulative += metric.counts[i]!;
          lines.push(
            `${metric.name}_bucket${formatLabels({ ...base, le: String(bound) })} ${cumulative}`,
          );
        });
        lines.push(`${metric.name}_bucket${formatLabels({ ...base, le: "+Inf" })} ${metric.count}`);
        lines.push(`${metric.name}_sum${formatLabels(base)} ${metric.sum}`);
        lines.push(`${metric.name}_count${formatLabels(base)} ${metric.count}`);
      } else {
        const value = metric.kind === "gauge" ? metric.current() : metric.value;
        lines.push(`${metric.name}${formatLabels(base)} ${value}`);
      }
    }
    return lines.join("\n") + "\n";
  }
}

function formatLabels(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  const body = entries
    // The exposition format escapes backslash, double quote and line feed in label values.
    .map(
      ([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`,
    )
    .join(",");
  return `{${body}}`;
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}
