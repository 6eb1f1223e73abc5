/**
 * The bench's boundaries, one entry each: its name, what it measures (the line `matchd bench
 * --help` prints) and what it runs on. run.ts dispatches on these names and usage.ts lists
 * them, so a boundary added here is known to both. No imports: the CLI's help reads it.
 */

export interface BoundaryEntry {
  name: string;
  /** What it measures, in lines of at most 80 characters for --help. */
  summary: readonly string[];
  /** `none`: in-process; `stack`: the private stack (or the URLs given); `own`: stacks of its own. */
  runsOn: "none" | "stack" | "own";
}

export const boundaryRegistry: readonly BoundaryEntry[] = [
  { name: "domain", runsOn: "none", summary: ["the pure matching domain in-process"] },
  {
    name: "datastore",
    runsOn: "stack",
    summary: [
      "the commit shape (MULTI..EXEC) alone, memory vs aof-replicated, plus WAITAOF latency",
    ],
  },
  {
    name: "broker",
    runsOn: "stack",
    summary: [
      "the broker alone: commands through a quorum queue to a consumer that only acks;",
      "with --flow events, the outbox's event traffic to a sink queue",
    ],
  },
  {
    name: "conductor",
    runsOn: "stack",
    summary: ["commands published to the queue until processed (conductor only)"],
  },
  {
    name: "outbox-drain",
    runsOn: "stack",
    summary: ["a backlog of events drained from the stream to sink queues"],
  },
  {
    name: "full-pipeline",
    runsOn: "stack",
    summary: ["conductor and outbox together until every event is received by sinks"],
  },
  {
    name: "round-trip",
    runsOn: "stack",
    summary: ["RPC commands (replyTo): send to durable reply"],
  },
  {
    name: "capacity",
    runsOn: "stack",
    summary: ["the highest offered rate a pipeline boundary sustains within a p99 bound"],
  },
  {
    name: "failover",
    runsOn: "own",
    summary: ["the full pipeline on the HA stack while a server or service is killed (--fault)"],
  },
  {
    name: "ha-cost",
    runsOn: "own",
    summary: [
      "full-pipeline on the plain stack, on a broker cluster and on the HA stack,",
      "interleaved in one invocation: what each costs in p99 and throughput",
    ],
  },
  {
    name: "soak",
    runsOn: "own",
    summary: [
      "full-pipeline open loop for minutes to hours, sampled: is memory and disk",
      "bounded once the dedup window (--dedup-retention-s) is crossed",
    ],
  },
  {
    name: "cells",
    runsOn: "own",
    summary: [
      "independent cells, each a stack, conductor, outbox and load pinned to a CPU of",
      "its own: one cell, then N at once (--cells), and the ratio",
    ],
  },
];

/** The `boundaries:` block of `matchd bench --help`. */
export function boundaryHelp(): string {
  const width = Math.max(...boundaryRegistry.map((b) => b.name.length)) + 3;
  return boundaryRegistry
    .flatMap((b) => b.summary.map((line, i) => `  ${(i === 0 ? b.name : "").padEnd(width)}${line}`))
    .join("\n");
}
