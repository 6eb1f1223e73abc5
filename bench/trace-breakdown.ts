/**
 * Where the time of a pipeline run's commands went, stage by stage: the conductor's trace of
 * a sample of commands (GET /trace) joined with the bench's own send and completion times,
 * all on the machine's epoch clock. Given for every traced command and for the slowest 1 %,
 * so a reader sees which stage the tail forms in.
 */
import type { TraceRecord } from "../src/conductor/trace";

export const traceStages = [
  ["broker in", "sent (scheduled) to delivered to the conductor"],
  ["conductor queue", "delivered to taken into a batch"],
  ["commit", "taken to committed: decode, dedup lookup, match, commit script"],
  ["durability", "committed to durable (WAITAOF)"],
  ["acknowledge", "durable to acknowledged: behind the batch before, dead letters"],
  ["after ack", "acknowledged to the bench's end: the reply through the broker, or the last event"],
] as const;

export interface TracedCommand extends TraceRecord {
  sentMs: number;
  endMs: number;
}

function stagesOf(c: TracedCommand): number[] {
  return [
    c.receivedMs - c.sentMs,
    c.takenMs - c.receivedMs,
    c.committedMs - c.takenMs,
    c.durableMs - c.committedMs,
    c.ackedMs - c.durableMs,
    c.endMs - c.ackedMs,
  ];
}

function meanLine(commands: readonly TracedCommand[]): string {
  const sums = new Array<number>(traceStages.length).fill(0);
  for (const command of commands) {
    const stages = stagesOf(command);
    for (let i = 0; i < stages.length; i++) sums[i]! += stages[i]!;
  }
  const total = commands.reduce((sum, c) => sum + (c.endMs - c.sentMs), 0);
  return `${traceStages.map(([name], i) => `${name} ${(sums[i]! / commands.length).toFixed(2)}`).join(", ")} (total ${(total / commands.length).toFixed(2)}) ms`;
}

/** One line for the report: the mean of each stage, over all traced commands and the tail. */
export function describeTrace(commands: readonly TracedCommand[], sampleEvery: number): string {
  if (commands.length === 0) return "no traced command in the timed window";
  const byTotal = [...commands].sort((a, b) => b.endMs - b.sentMs - (a.endMs - a.sentMs));
  const tail = byTotal.slice(0, Math.max(1, Math.ceil(commands.length / 100)));
  return `${commands.length} commands traced (1 in ${sampleEvery}), mean per stage: all: ${meanLine(commands)}; slowest 1 % (${tail.length}): ${meanLine(tail)}`;
}
