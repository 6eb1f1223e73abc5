/**
 * What a bench boundary declares about itself: its name, what it measures, what it runs on,
 * its flags as one zod schema (with the reasons it refuses others' flags), and how it runs.
 * flag-check.ts checks every bench flag against these, so each check lives in one place.
 */
import { z } from "zod";
import type { BoundaryRunOptions } from "./stack-boundary";
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
  /**
   * Runs it once its flags passed, printing its report; returns the exit code. Its code is
   * imported when it runs, so that `--help` loads only these declarations.
   */
  run: (options: BoundaryRunOptions) => Promise<number>;
}

/** An integer flag from `min` (to `max`); its problem reads "--x must be an integer >= 1". */
export function intField(min: number, max?: number) {
  const error =
    max === undefined ? `must be an integer >= ${min}` : `must be an integer from ${min} to ${max}`;
  const base = z.coerce.number({ error }).int({ error }).min(min, { error });
  return max === undefined ? base : base.max(max, { error });
}

/** An integer flag's value, or `fallback`; flag-check.ts has checked every one. */
export function intFlag(
  flags: ReadonlyMap<string, string>,
  name: string,
  fallback: number,
): number {
  const raw = flags.get(name);
  return raw === undefined ? fallback : Number(raw);
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

/**
 * Each valued flag's argument and meaning, for `matchd bench --help` and the flag table of
 * docs/benchmarks.md; which boundaries take it comes from their schemas.
 */
export const flagDocs: Record<string, { arg: string; meaning: string }> = {
  "--workload": {
    arg: "NAME",
    meaning: "alternating (default) | mixed | sweep | multi-pair | exchange",
  },
  "--commands": { arg: "N", meaning: "commands to time (the default depends on the boundary)" },
  "--seed": { arg: "S", meaning: "workload seed (default 1)" },
  "--warmup": { arg: "N", meaning: "commands run first and not timed" },
  "--resting": { arg: "N", meaning: "measure RSS with N resting orders; runs no workload" },
  "--dir": { arg: "DIR", meaning: "where the private stack lives (default a temp dir)" },
  "--report": { arg: "FILE", meaning: "also write a self-contained HTML report" },
  "--connections": {
    arg: "C",
    meaning: "connections, each committing to a partition of its own (default 1, then 8)",
  },
  "--rate": {
    arg: "R",
    meaning:
      "offer R commands/s, open loop, instead of closed loop; latency from each command's scheduled send time",
  },
  "--duration": {
    arg: "S",
    meaning: "run for S seconds instead of --commands; needs --rate, except round-trip (1000/s)",
  },
  "--subscribers": {
    arg: "N",
    meaning:
      "WebSocket clients subscribed to the feed, spread over the workload's pairs (default 100)",
  },
  "--stalled": {
    arg: "N",
    meaning:
      "feed subscribers that stop reading: each must be cut off, the others unaffected (default 0)",
  },
  "--flow": {
    arg: "F",
    meaning: "commands (default: the conductor's traffic) | events (the outbox's traffic)",
  },
  "--events": { arg: "N", meaning: "backlog size, or events to publish (default 100000)" },
  "--conductor-url": {
    arg: "URL",
    meaning: "use a running conductor instead of starting one",
  },
  "--query-load": {
    arg: "C",
    meaning:
      "C loops send the conductor's HTTP queries back to back during the timed run (digest, book, order, result, metrics)",
  },
  "--series": { arg: "FILE", meaning: "also write the per-second series as JSON (soak reads it)" },
  "--floor-seconds": {
    arg: "S",
    meaning:
      "after an open-loop run, time each leg of the path alone at its rate for S seconds, 0..60 (default 10; 0: none)",
  },
  "--sink": {
    arg: "S",
    meaning:
      "live (default: the sink reads during the drain, which ends when it has every event) | queued (the drain ends when the stream is empty and the sink's queue holds every event; the sink reads and checks them afterwards)",
  },
  "--outbox-url": { arg: "URL", meaning: "use a running outbox instead of starting one" },
  "--clock": {
    arg: "wall",
    meaning:
      "the exchange workload's good-till-date orders, icebergs, one-cancels-other lists and dead-man's switches on the wall clock (needs --rate); checked by a replay with the conductor's recorded times",
  },
  "--boundary": {
    arg: "B",
    meaning: "the boundary searched: full-pipeline (default) | conductor | round-trip",
  },
  "--p99-ms": { arg: "B", meaning: "the p99 bound, ms (default 25)" },
  "--pairs": { arg: "N", meaning: "alternating broker-alone and conductor runs (default 3)" },
  "--step-seconds": {
    arg: "S",
    meaning:
      "each open-loop step's length (default 10); --rate sets the first step's rate (default 1000), doubled until a step fails, then bisected",
  },
  "--fault": {
    arg: "KIND[,KIND...]",
    meaning:
      "what fails, in turn: datastore-primary (SIGKILL, the default) | primary-handover (SENTINEL FAILOVER) | primary-freeze (SIGSTOP until a promotion) | primary-partition (cut off from the Sentinels) | primary-isolate (from the Sentinels and replicas) | replica-kill | sentinel-kill | replica-standin (a replica cut off from the Sentinels, the other's link cut, the primary killed) | two-faults (a replica cut off from the Sentinels, then a handover); or alone: broker-node | conductor | outbox (the active one, while a standby runs)",
  },
  "--faults": {
    arg: "N",
    meaning: "how many kills, 1..100 (default 5), each once the last one recovered",
  },
  "--fault-interval": { arg: "S", meaning: "seconds between kills, 4..600 (default 10)" },
  "--rounds": {
    arg: "N",
    meaning:
      "rounds of the interleaved comparison (ha-cost: default 2, each set-up at --rate 1000 for --duration 20 s, then --commands 20000; cells: default 1)",
  },
  "--sample-seconds": {
    arg: "S",
    meaning: "seconds between samples (default 5); --rate defaults to 2000, --duration to 1800",
  },
  "--restart-replica-at": {
    arg: "S",
    meaning: "SIGKILL the replica S seconds into the load, and restart it",
  },
  "--cells": {
    arg: "LIST",
    meaning: "the cell counts to run, e.g. 1,2 (default); at most one a CPU",
  },
};

/** "a, b and c". */
export function listed(names: readonly string[]): string {
  return names.length <= 1
    ? (names[0] ?? "")
    : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}
