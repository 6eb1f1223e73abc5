// A log-linear latency histogram in the HdrHistogram style: exact below 128 ns, then 64
// sub-buckets per power of two (under 1.6% relative error), fixed memory, mergeable.

const LINEAR_LIMIT = 128;
const SUB_BUCKETS = 64;
const MAX_EXPONENT = 44; // 2^44 ns is about 4.9 hours; larger values are clamped.
const BUCKET_COUNT = LINEAR_LIMIT + (MAX_EXPONENT - 6) * SUB_BUCKETS;

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
  p999: number;
  max: number;
}

export class LatencyHistogram {
  private readonly counts = new Float64Array(BUCKET_COUNT);
  count = 0;
  max = 0;
  min = Number.POSITIVE_INFINITY;
  sum = 0;

  /** Records one latency in nanoseconds (fractions are truncated; negatives count as 0). */
  record(nanoseconds: number): void {
    const value = nanoseconds > 0 ? Math.floor(nanoseconds) : 0;
    this.counts[bucketOf(value)]!++;
    this.count++;
    this.sum += value;
    if (value > this.max) this.max = value;
    if (value < this.min) this.min = value;
  }

  merge(other: LatencyHistogram): void {
    for (let i = 0; i < BUCKET_COUNT; i++) this.counts[i]! += other.counts[i]!;
    this.count += other.count;
    this.sum += other.sum;
    if (other.max > this.max) this.max = other.max;
    if (other.min < this.min) this.min = other.min;
  }

  /** The value (ns) at or below which `percentile`% of recordings fall, as a bucket midpoint. */
  valueAt(percentile: number): number {
    if (this.count === 0) return 0;
    // In integers (the percentile in thousandths): 99.9 / 100 is 0.9990000000000001 in
    // floating point, and 99.9 × 41,000 / 100 is 40,959.00000000001, so ceil() picked the
    // rank above (40,960 of 41,000 instead of 40,959).
    const rank = Math.max(1, Math.ceil((Math.round(percentile * 1000) * this.count) / 100_000));
    let seen = 0;
    for (let i = 0; i < BUCKET_COUNT; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(bucketMidpoint(i), this.max);
    }
    return this.max;
  }

  /** How many recordings are at or below `nanoseconds` (to bucket resolution). */
  countBelow(nanoseconds: number): number {
    const last = bucketOf(Math.max(0, Math.floor(nanoseconds)));
    let seen = 0;
    for (let i = 0; i <= last; i++) seen += this.counts[i]!;
    return seen;
  }

  percentilesNs(): Percentiles {
    return {
      p50: this.valueAt(50),
      p95: this.valueAt(95),
      p99: this.valueAt(99),
      p999: this.valueAt(99.9),
      max: this.max,
    };
  }

  /** Percentiles converted to milliseconds, rounded to 0.1 µs. */
  percentilesMs(): Percentiles {
    const ns = this.percentilesNs();
    const ms = (v: number) => Math.round(v / 100) / 10_000;
    return {
      p50: ms(ns.p50),
      p95: ms(ns.p95),
      p99: ms(ns.p99),
      p999: ms(ns.p999),
      max: ms(ns.max),
    };
  }

  reset(): void {
    this.counts.fill(0);
    this.count = 0;
    this.max = 0;
    this.min = Number.POSITIVE_INFINITY;
    this.sum = 0;
  }
}

function bucketOf(value: number): number {
  if (value < LINEAR_LIMIT) return value;
  let exponent = Math.floor(Math.log2(value));
  // log2 can round up just below a power of two; correct it so the sub-bucket stays in range.
  if (2 ** exponent > value) exponent--;
  if (exponent >= MAX_EXPONENT) return BUCKET_COUNT - 1;
  const sub = Math.floor(value / 2 ** (exponent - 6)) - SUB_BUCKETS;
  return LINEAR_LIMIT + (exponent - 7) * SUB_BUCKETS + sub;
}

function bucketLow(index: number): number {
  if (index < LINEAR_LIMIT) return index;
  const exponent = 7 + Math.floor((index - LINEAR_LIMIT) / SUB_BUCKETS);
  const sub = (index - LINEAR_LIMIT) % SUB_BUCKETS;
  return (SUB_BUCKETS + sub) * 2 ** (exponent - 6);
}

function bucketMidpoint(index: number): number {
  if (index < LINEAR_LIMIT) return index;
  const low = bucketLow(index);
  const exponent = 7 + Math.floor((index - LINEAR_LIMIT) / SUB_BUCKETS);
  return low + 2 ** (exponent - 7);
}
