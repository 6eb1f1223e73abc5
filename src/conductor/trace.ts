/**
 * Where a command's time goes inside the conductor, for a sample of commands: when it was
 * delivered, taken into a batch, committed, durable and acknowledged, on the epoch clock with
 * sub-millisecond resolution (so a bench on the same machine can set its own send and receive
 * times beside them). One command in `sampleEvery`, the latest `capacity` kept.
 */

export interface TraceRecord {
  commandId: string;
  receivedMs: number;
  takenMs: number;
  committedMs: number;
  durableMs: number;
  ackedMs: number;
}

/** Epoch milliseconds with the resolution of performance.now(). */
export const epochMs = (): number => performance.timeOrigin + performance.now();

export class CommandTrace {
  private readonly records: TraceRecord[] = [];
  private next = 0;
  private seen = 0;

  constructor(
    readonly sampleEvery = 8,
    private readonly capacity = 20_000,
  ) {}

  /** Whether the next delivery is one of the sample (every sampleEvery-th). */
  sampled(): boolean {
    return this.seen++ % this.sampleEvery === 0;
  }

  record(entry: TraceRecord): void {
    if (this.records.length < this.capacity) this.records.push(entry);
    else this.records[this.next] = entry;
    this.next = (this.next + 1) % this.capacity;
  }

  /** The kept records, oldest first. */
  all(): TraceRecord[] {
    return this.records.length < this.capacity
      ? [...this.records]
      : [...this.records.slice(this.next), ...this.records.slice(0, this.next)];
  }
}
