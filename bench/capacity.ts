/**
 * `matchd bench capacity`: the highest offered rate the pipeline sustains. Open-loop steps at
 * rising rates (doubling from the start rate until one fails), then a bisection between the
 * last that held (or nothing) and the first that did not. A step is sustained when
 * every invariant held, it completed what was offered within a second of its schedule
 * (nothing queued up), and its command queue and event stream stayed within half a second of
 * traffic. Whether its p99 stayed within a bound is noted beside it: the highest such rate is
 * a row of the report, never what decides the search, since a latency bound says more about
 * the host than about the pipeline.
 */
import type { Percentiles } from "./histogram";

export interface StepResult {
  offered: number;
  achieved: number;
  seconds: number;
  latencyMs: Percentiles;
  invariantsOk: boolean;
  /** The names of the invariants that failed. */
  failedInvariants: string[];
  maxQueueDepth: number;
  maxStreamLength: number;
  /** AOF rewrites (primary and replicas) the step crossed. */
  rewrites?: number;
  /** p99 of the commands in flight during an AOF rewrite, and of the others (none: -1). */
  p99DuringRewrites?: number;
  p99OutsideRewrites?: number;
}

export interface CapacityStep extends StepResult {
  /** Sustained: invariants held, on schedule, no backlog. */
  held: boolean;
  /** Why it was not sustained; empty when it was. */
  reasons: string[];
  /** Its p99 stayed within the bound. */
  withinBound: boolean;
}

export interface CapacityOptions {
  p99Ms: number;
  stepSeconds: number;
  startRate: number;
  /** No rate above this is tried. */
  maxRate: number;
  /** Bisection steps after the ramp. */
  bisections: number;
  runStep: (rate: number, step: number) => Promise<StepResult>;
  progress: (line: string) => void;
}

/** What a step must show to count as sustained (see the file's header). */
export function judgeStep(result: StepResult, p99Ms: number, stepSeconds: number): CapacityStep {
  const reasons: string[] = [];
  if (!result.invariantsOk)
    reasons.push(`invariants failed: ${result.failedInvariants.join(", ")}`);
  if (result.seconds > stepSeconds + 1)
    reasons.push(`took ${result.seconds.toFixed(1)} s for a ${stepSeconds} s schedule`);
  const backlog = result.offered / 2;
  if (result.maxQueueDepth > backlog)
    reasons.push(`command queue reached ${result.maxQueueDepth} (> ${backlog})`);
  if (result.maxStreamLength > backlog)
    reasons.push(`event stream reached ${result.maxStreamLength} (> ${backlog})`);
  return {
    ...result,
    held: reasons.length === 0,
    reasons,
    withinBound: result.latencyMs.p99 <= p99Ms,
  };
}

export interface CapacityFound {
  /** The highest rate sustained; undefined when not even the lowest one tried was. */
  sustained: CapacityStep | undefined;
  /** The highest rate sustained with its p99 within the bound, among the steps run. */
  bounded: CapacityStep | undefined;
  steps: CapacityStep[];
}

/** Runs the search (see the file's header). */
export async function searchCapacity(options: CapacityOptions): Promise<CapacityFound> {
  const steps: CapacityStep[] = [];
  const run = async (rate: number): Promise<CapacityStep> => {
    options.progress(`capacity: step ${steps.length + 1} at ${rate} commands/s`);
    const step = judgeStep(
      await options.runStep(rate, steps.length),
      options.p99Ms,
      options.stepSeconds,
    );
    steps.push(step);
    options.progress(
      `capacity: ${rate}/s ${step.held ? "sustained" : `not sustained (${step.reasons.join("; ")})`}, p99 ${step.latencyMs.p99} ms`,
    );
    return step;
  };
  let held: CapacityStep | undefined;
  let failed: number | undefined;
  for (let rate = options.startRate; rate <= options.maxRate; rate *= 2) {
    const step = await run(rate);
    if (!step.held) {
      failed = rate;
      break;
    }
    held = step;
  }
  if (failed !== undefined) {
    let low = held?.offered ?? 0;
    let high = failed;
    for (let i = 0; i < options.bisections; i++) {
      // Rates in hundreds: finer than that is below the machine's noise.
      const rate = Math.round((low + high) / 200) * 100;
      if (rate <= low || rate >= high) break;
      const step = await run(rate);
      if (step.held) {
        held = step;
        low = rate;
      } else high = rate;
    }
  }
  const bounded = steps
    .filter((step) => step.held && step.withinBound)
    .reduce<CapacityStep | undefined>(
      (a, b) => (a === undefined || b.offered > a.offered ? b : a),
      undefined,
    );
  return { sustained: held, bounded, steps };
}
