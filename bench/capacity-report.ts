/**
 * The capacity boundary's report: runs the search (capacity.ts) with one open-loop pipeline
 * run per step on the services already started, and states the headline figure with the
 * whole curve beside it.
 */
import type { Config } from "../src/config/schema";
import { searchCapacity } from "./capacity";
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
  const { sustained, steps } = await searchCapacity({
    ...capacityDefaults,
    p99Ms: run.p99Ms,
    stepSeconds: run.stepSeconds,
    startRate: run.startRate,
    progress: run.progress,
    runStep: async (rate, step) => {
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
        // Only the full pipeline runs an outbox: the stream of the others grows by design.
        maxStreamLength:
          run.pipelineBoundary === "full-pipeline" ? Number(result.facts.maxStreamLength) : 0,
      };
    },
  });
  const curve = steps.map(
    (s) =>
      `${s.offered}/s offered: ${s.achieved}/s achieved, p50 ${s.latencyMs.p50} p99 ${s.latencyMs.p99} p99.9 ${s.latencyMs.p999} ms, queue <= ${s.maxQueueDepth}, stream <= ${s.maxStreamLength}: ${s.held ? "held" : `not held (${s.reasons.join("; ")})`}`,
  );
  const rate = sustained?.offered ?? 0;
  const overloadOnly = new Set(["durabilityTimeouts", "outboxDurabilityTimeouts"]);
  const lost = steps.filter((s) =>
    s.failedInvariants.some((name) => !overloadOnly.has(name)),
  ).length;
  return {
    boundary: "capacity",
    boundaryStatement: `the highest offered rate of ${run.pipelineBoundary} whose p99 stays within ${run.p99Ms} ms with every invariant holding and neither the command queue nor the event stream growing; open-loop steps of ${run.stepSeconds} s (latency from each command's scheduled send), doubling from ${run.startRate}/s, then ${capacityDefaults.bisections} bisection steps`,
    durability: run.durability,
    workload: "alternating",
    workloadDescription: "limit bid then limit ask at 100, volume 1; every ask fills the bid",
    commands: steps.reduce((sum, s) => sum + stepCommands(s.offered, run.stepSeconds), 0),
    warmup: 0,
    seconds: Math.round((performance.now() - started) / 10) / 100,
    commandsPerSecond: rate,
    latencyMs: sustained?.latencyMs ?? { p50: -1, p95: -1, p99: -1, p999: -1, max: -1 },
    invariants: {
      ok: sustained !== undefined && lost === 0,
      aRateHeld: sustained !== undefined,
      // Overload may time out durability waits (retried, nothing acknowledged early); any
      // other failed invariant, at any rate, is a fault of the pipeline.
      stepsWithOtherFailedInvariants: lost,
    },
    checks: ["stepsWithOtherFailedInvariants"],
    environment: run.environment,
    extra: {
      headline:
        sustained === undefined
          ? `not even ${Math.min(...steps.map((s) => s.offered))} commands/s, the lowest rate tried, held at p99 <= ${run.p99Ms} ms`
          : `sustainable ${rate} commands/s at p99 <= ${run.p99Ms} ms (${run.pipelineBoundary}, measured p99 ${sustained.latencyMs.p99} ms)`,
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
          held: s.held,
          reasons: s.reasons,
        })),
      ),
    },
  };
}
