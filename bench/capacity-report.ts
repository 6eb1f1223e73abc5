/**
 * The capacity boundary's report: runs the search (capacity.ts) with one open-loop pipeline
 * run per step on the services already started, and states the headline figure with the
 * whole curve beside it.
 */
import type { Config } from "../src/config/schema";
import { type CapacityStep, type StepResult, searchCapacity } from "./capacity";
import { type Floor, measureFloor, overFloor } from "./floor";
import type { LatencyHistogram } from "./histogram";
import type { PipelineBoundary, PipelineOptions } from "./pipeline-bench";
import { runPipelineBench } from "./pipeline-bench";
import type { BenchReport } from "./report";

export const capacityDefaults = {
  p99Ms: 25,
  stepSeconds: 10,
  startRate: 1000,
  maxRate: 64_000,
  bisections: 3,
};

/** Commands a step times: alternating bid/ask pairs, so that it leaves the book empty. */
const stepCommands = (rate: number, stepSeconds: number) =>
  2 * Math.round((rate * stepSeconds) / 2);

export interface CapacityRun {
  pipelineBoundary: PipelineBoundary;
  config: Config;
  urls: Pick<PipelineOptions, "datastoreUrl" | "brokerUrl" | "conductorUrl" | "outboxUrl">;
  seed: number;
  p99Ms: number;
  stepSeconds: number;
  startRate: number;
  environment: Record<string, string>;
  durability: string;
  progress: (line: string) => void;
}

export async function capacityReport(run: CapacityRun): Promise<BenchReport> {
  const started = performance.now();
  const { sustained, bounded, steps } = await searchCapacity({
    ...capacityDefaults,
    p99Ms: run.p99Ms,
    stepSeconds: run.stepSeconds,
    startRate: run.startRate,
    progress: run.progress,
    runStep: (rate, step) => runStep(run, rate, step),
  });
  const floors = await floorsOf(run, steps, sustained);
  const curve = steps.map(
    (s) =>
      `${s.offered}/s offered: ${s.achieved}/s achieved, p50 ${s.latencyMs.p50} p99 ${s.latencyMs.p99} p99.9 ${s.latencyMs.p999} ms (${rewritesText(s)}), queue <= ${s.maxQueueDepth}, stream <= ${s.maxStreamLength}: ${verdict(s, run.p99Ms)}`,
  );
  const rate = sustained?.offered ?? 0;
  const overloadOnly = new Set(["durabilityTimeouts", "outboxDurabilityTimeouts"]);
  const lost = steps.filter((s) =>
    s.failedInvariants.some((name) => !overloadOnly.has(name)),
  ).length;
  return {
    boundary: "capacity",
    boundaryStatement: `the highest offered rate ${run.pipelineBoundary} sustains: every invariant holding, what was offered completed on schedule, neither the command queue nor the event stream growing; open-loop steps of ${run.stepSeconds} s (latency from each command's scheduled send; AOF rewrites as the data causes them, the first step forcing one), doubling from ${run.startRate}/s, then ${capacityDefaults.bisections} bisection steps. Beside it, the highest of those rates whose p99 stayed within ${run.p99Ms} ms`,
    durability: run.durability,
    workload: "alternating",
    workloadDescription: "limit bid then limit ask at 100, volume 1; every ask fills the bid",
    commands: steps.reduce((sum, s) => sum + stepCommands(s.offered, run.stepSeconds), 0),
    warmup: 0,
    seconds: Math.round((performance.now() - started) / 10) / 100,
    commandsPerSecond: rate,
    latencyMs: sustained?.latencyMs ?? { p50: -1, p95: -1, p99: -1, p999: -1, max: -1 },
    invariants: {
      // A slow host sustains a lower rate; only a broken invariant fails the run. Overload
      // may time out durability waits (retried, nothing acknowledged early): that step is
      // not sustained, and nothing is wrong.
      ok: lost === 0,
      stepsWithOtherFailedInvariants: lost,
    },
    checks: ["stepsWithOtherFailedInvariants"],
    environment: run.environment,
    extra: {
      headline: headline(run, steps, sustained, bounded, floors),
      ...Object.fromEntries(
        floors.map(({ step, floor }) => [
          `floorAt${step.offered}`,
          `${floor.legs.map((leg) => `${leg.name}: p50 ${leg.latencyMs.p50} p99 ${leg.latencyMs.p99} ms`).join("; ")}; sum p50 ${floor.sum.p50} p99 ${floor.sum.p99}; path over it ${overFloor(step.latencyMs, floor, 1)}`,
        ]),
      ),
      rateWithinP99Bound: bounded === undefined ? "none" : `${bounded.offered} commands/s`,
      curve: curve.join(" | "),
      stepSeconds: run.stepSeconds,
      p99BoundMs: run.p99Ms,
      // The curve as data: the HTML page's step table and latency-throughput chart.
      steps: JSON.stringify(
        steps.map((s) => ({
          offered: s.offered,
          achieved: s.achieved,
          ...s.latencyMs,
          maxQueueDepth: s.maxQueueDepth,
          maxStreamLength: s.maxStreamLength,
          rewrites: s.rewrites,
          p99DuringRewrites: s.p99DuringRewrites,
          p99OutsideRewrites: s.p99OutsideRewrites,
          held: s.held,
          reasons: s.reasons,
          withinBound: s.withinBound,
        })),
      ),
    },
  };
}

/** One step: an open-loop pipeline run at `rate`, judged later by the search. */
async function runStep(run: CapacityRun, rate: number, step: number): Promise<StepResult> {
  const commands = stepCommands(rate, run.stepSeconds);
  const result = await runPipelineBench({
    boundary: run.pipelineBoundary,
    config: run.config,
    ...run.urls,
    workload: "alternating",
    commands,
    warmup: 2 * Math.round(Math.min(2000, rate) / 2),
    // A seed per step: the same command ids again would be answered as duplicates.
    seed: run.seed + step,
    rate,
    // Rewrites as often as the data causes them, as in production; the first step forces
    // one, so that every search crosses at least one.
    forceRewrites: step === 0,
    progress: () => undefined,
  });
  return {
    offered: rate,
    achieved: Math.round(result.commands / result.seconds),
    seconds: result.seconds,
    latencyMs: result.latency.percentilesMs(),
    invariantsOk: result.invariants.ok,
    failedInvariants: Object.keys(result.invariants)
      .filter((key) => key.endsWith("Failed"))
      .map((key) => key.slice(0, -"Failed".length)),
    maxQueueDepth: Number(result.facts.maxQueueDepth),
    rewrites: result.spans.length,
    p99DuringRewrites: p99Of(result.rewriteSplit.during),
    p99OutsideRewrites: p99Of(result.rewriteSplit.outside),
    // Only the full pipeline runs an outbox: the stream of the others grows by design.
    maxStreamLength:
      run.pipelineBoundary === "full-pipeline" ? Number(result.facts.maxStreamLength) : 0,
  };
}

/** A step's p99 over some of its commands; -1 when none fell there. */
const p99Of = (histogram: LatencyHistogram) =>
  histogram.count === 0 ? -1 : histogram.percentilesMs().p99;

/** A step's AOF rewrites and its p99 during and outside them. */
function rewritesText(step: CapacityStep): string {
  if (!step.rewrites) return "no AOF rewrite";
  const rewrites = `${step.rewrites} AOF rewrite${step.rewrites === 1 ? "" : "s"}`;
  return `${rewrites}: p99 ${step.p99DuringRewrites} during, ${step.p99OutsideRewrites} outside`;
}

/** A latency for a sentence: a tenth of a millisecond is below the machine's noise. */
const ms = (value: number) => `${Math.round(value * 10) / 10} ms`;

/** How long each leg of a floor is offered its step's rate (the demo stays within minutes). */
const floorSeconds = 5;

interface StepFloor {
  step: CapacityStep;
  floor: Floor;
}

/**
 * The floor (bench/floor.ts) at the sustained rate and at the lowest rate tried, measured
 * after the search on the same stack; none for the conductor boundary, whose path ends in
 * the datastore.
 */
async function floorsOf(
  run: CapacityRun,
  steps: CapacityStep[],
  sustained: CapacityStep | undefined,
): Promise<StepFloor[]> {
  const path = run.pipelineBoundary;
  if (path === "conductor" || steps.length === 0) return [];
  const lowest = steps.reduce((a, b) => (b.offered < a.offered ? b : a));
  const at = sustained === undefined || sustained === lowest ? [lowest] : [sustained, lowest];
  const floors: StepFloor[] = [];
  for (const step of at) {
    const floor = await measureFloor(path, {
      config: run.config,
      rate: step.offered,
      samples: step.offered * floorSeconds,
      seed: run.seed,
      progress: run.progress,
    });
    floors.push({ step, floor });
  }
  return floors;
}

function verdict(step: CapacityStep, p99Ms: number): string {
  if (!step.held) return `not sustained (${step.reasons.join("; ")})`;
  return step.withinBound
    ? `sustained, p99 within ${p99Ms} ms`
    : `sustained, p99 above ${p99Ms} ms`;
}

/** One line a person can act on, whatever the host: the rate, its latency, the bound's row. */
function headline(
  run: Pick<CapacityRun, "pipelineBoundary" | "p99Ms" | "durability">,
  steps: CapacityStep[],
  sustained: CapacityStep | undefined,
  bounded: CapacityStep | undefined,
  floors: StepFloor[],
): string {
  const lowest = steps.reduce((a, b) => (b.offered < a.offered ? b : a));
  const bound = `p99 <= ${run.p99Ms} ms`;
  const boundRow =
    bounded === undefined
      ? `${bound}: none of the rates tried (the lowest, ${lowest.offered}/s, had p99 ${ms(lowest.latencyMs.p99)})`
      : `${bound}: ${bounded.offered} commands/s (p99 ${ms(bounded.latencyMs.p99)})`;
  if (sustained === undefined) {
    return `${run.pipelineBoundary} sustained none of the rates tried: the lowest, ${lowest.offered}/s, ${lowest.reasons.join("; ")}`;
  }
  const { p50, p99 } = sustained.latencyMs;
  const floorRow =
    floors.length === 0
      ? ""
      : `; over the floor of its parts: ${floors.map(({ step, floor }) => `${overFloor(step.latencyMs, floor, 1)} at ${step.offered}/s`).join(", ")}`;
  return `${run.pipelineBoundary} sustains ${sustained.offered} commands/s (${run.durability.split(":")[0]}): p50 ${ms(p50)}, p99 ${ms(p99)}; at ${boundRow}${floorRow}`;
}
