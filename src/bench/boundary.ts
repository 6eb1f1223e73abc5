/**
 * What a bench boundary declares about itself: its name, what it measures, what it runs on,
 * and its flags as one zod schema (with the reasons it refuses others' flags). flag-check.ts
 * checks every bench flag against these, so each check lives in one place.
 */
import { z } from "zod";
import { type WorkloadName, workloadNames } from "./workloads";

export type FlagSchema = z.ZodObject<z.ZodRawShape>;

export interface BoundaryEntry {
  name: string;
  /** What it measures, in lines of at most 80 characters for --help. */
  summary: readonly string[];
  /** `none`: in-process; `stack`: the private stack (or the URLs given); `own`: stacks of its own. */
  runsOn: "none" | "stack" | "own";
  /** For `own`: what it starts, said when datastore or broker URLs are given. */
  starts?: string;
  /** Its flags, keyed by flag name; every other bench flag is refused. */
  flags: FlagSchema;
  /** Why it refuses any flag not its own; without one, the flag's boundaries are named. */
  refusesOthers?: string;
  /** Why it refuses particular flags of other boundaries. */
  refuses?: Readonly<Record<string, string>>;
  /** How another boundary's refusal names this one for a flag, e.g. "broker --flow events". */
  takesAs?: Readonly<Record<string, string>>;
  /** Problems between its flags (one needs another), found once each value parsed. */
  check?: (flags: ReadonlyMap<string, string>, keepStack: boolean) => string[];
}

/** An integer flag from `min` (to `max`); its problem reads "--x must be an integer >= 1". */
export function intFlag(min: number, max?: number) {
  const error =
    max === undefined ? `must be an integer >= ${min}` : `must be an integer from ${min} to ${max}`;
  const base = z.coerce.number({ error }).int({ error }).min(min, { error });
  return max === undefined ? base : base.max(max, { error });
}

/**
 * A flag taking one of `values`. An error starting "must" follows the flag's name; any other
 * is a sentence of its own; either way the value given is named after it.
 */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T, error?: string) {
  return z.enum(values, { error: error ?? `must be one of ${values.join(", ")}` });
}

export const workloadFlag = () =>
  oneOf(workloadNames as readonly WorkloadName[] as [WorkloadName, ...WorkloadName[]]);

export const textFlag = () => z.string().min(1, { error: "must not be empty" });

/** What describes each flag in the flag table of docs/benchmarks.md. */
export const flagMeanings: Record<string, string> = {
  "--workload": "`alternating` (default), `mixed`, `sweep`, `multi-pair`, `exchange`",
  "--commands": "commands to time",
  "--events": "backlog size, or events to publish (default 100,000)",
  "--seed": "workload seed (default 1)",
  "--warmup": "commands run first and not timed",
  "--rate": "offer R commands/s, open loop; latency from each command's scheduled send time",
  "--duration": "run for S seconds; needs `--rate`, except `round-trip`, which takes it alone",
  "--connections": "datastore connections (default 1 and 8)",
  "--resting": "measure RSS with N resting orders; runs no workload",
  "--dir": "the stack's directory",
  "--report": "also a self-contained HTML report",
  "--conductor-url": "use a running conductor",
  "--outbox-url": "use a running outbox",
  "--flow": "`commands` (default: the conductor's traffic) or `events` (the outbox's traffic)",
  "--sink":
    "`live` (default: the sink reads during the drain) or `queued` (the sink's queue collects the events; the sink reads and checks them after the timed window)",
  "--query-load":
    "C loops send the conductor's HTTP queries back to back during the timed run ([below](#digest-and-other-queries-under-load))",
  "--boundary": "the boundary searched: `full-pipeline` (default), `conductor`, `round-trip`",
  "--p99-ms": "the p99 bound (default 25)",
  "--step-seconds":
    "each step's length (default 10); `--rate` sets the first step's rate (default 1,000)",
  "--fault": "what is killed: `datastore-primary` (default), `broker-node`, `conductor`, `outbox`",
  "--faults": "how many kills, 1..100 (default 5)",
  "--fault-interval": "seconds from one kill to the next, 4..600 (default 10)",
  "--rounds": "rounds of the interleaved comparison",
  "--series": "also write the per-second series as JSON (used by `soak`)",
  "--sample-seconds": "seconds between samples (default 5)",
  "--restart-replica-at": "seconds into the load at which the replica is killed and restarted",
  "--cells": "the cell counts to run, in order, e.g. `1,2` (default)",
};

/** "a, b and c". */
export function listed(names: readonly string[]): string {
  return names.length <= 1
    ? (names[0] ?? "")
    : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}
