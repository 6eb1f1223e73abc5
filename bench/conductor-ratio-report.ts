/**
 * The conductor-ratio report: broker alone, then conductor, `--pairs` times on one stack and
 * one conductor, each closed loop over the same command count. The medians' ratio is how much
 * of the broker's own ceiling the conductor reaches (issue #25's target: 0.55).
 */
import { brokerCommandReport } from "./broker-report";
import { pipelineRunReport, pipelineServices } from "./pipeline-report";
import type { BenchReport } from "./report";
import { intFlag, round, type StackContext, type StackReport } from "./stack-boundary";

export const conductorRatioTarget = 0.55;

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

export async function conductorRatioReport(context: StackContext): Promise<StackReport> {
  const { config, flags, progress, envFacts } = context;
  const pairs = intFlag(flags, "--pairs", 3);
  const seed = intFlag(flags, "--seed", 1);
  // The same count for both: the broker boundary's own default is larger.
  const commands = intFlag(flags, "--commands", 20_000);
  const services = await pipelineServices(context, "conductor");
  const broker: BenchReport[] = [];
  const conductor: BenchReport[] = [];
  for (let pair = 0; pair < pairs; pair++) {
    // A seed per run: the same order ids again would be answered as duplicates.
    const runFlags = new Map(flags)
      .set("--seed", String(seed + pair))
      .set("--commands", String(commands));
    progress(`pair ${pair + 1} of ${pairs}: broker alone`);
    broker.push(await brokerCommandReport(config, runFlags, envFacts, progress));
    progress(`pair ${pair + 1} of ${pairs}: conductor`);
    const run = await pipelineRunReport({ ...context, flags: runFlags }, "conductor", services);
    conductor.push(run.report);
  }
  const brokerRates = broker.map((r) => r.commandsPerSecond);
  const conductorRates = conductor.map((r) => r.commandsPerSecond);
  const medianBroker = median(brokerRates);
  const medianConductor = median(conductorRates);
  const ratio = medianConductor / medianBroker;
  // The run nearest the median (with an even count of pairs, no run is the median).
  const distance = (r: BenchReport) => Math.abs(r.commandsPerSecond - medianConductor);
  const shown = conductor.reduce((best, r) => (distance(r) < distance(best) ? r : best));
  const failed = [...broker, ...conductor].filter((r) => !r.invariants.ok);
  const report: BenchReport = {
    boundary: "conductor-ratio",
    boundaryStatement: `${pairs} alternating pairs on one stack and one conductor, closed loop: the broker alone (${broker[0]!.boundaryStatement.split(";")[0]}), then the conductor boundary; ratio = median conductor rate / median broker rate`,
    durability: shown.durability,
    workload: shown.workload,
    commands: shown.commands,
    warmup: shown.warmup,
    seconds: shown.seconds,
    commandsPerSecond: Math.round(medianConductor),
    latencyMs: shown.latencyMs,
    invariants: {
      ok: failed.length === 0,
      runsWithBrokenInvariants: failed.length,
      runs: broker.length + conductor.length,
    },
    checks: ["runsWithBrokenInvariants"],
    environment: envFacts,
    extra: {
      latencyMeasures:
        "the conductor run nearest the median rate: closed loop, so mostly time spent queueing",
      brokerAloneCommandsPerSecond: JSON.stringify(brokerRates),
      conductorCommandsPerSecond: JSON.stringify(conductorRates),
      medianBrokerAlone: Math.round(medianBroker),
      medianConductor: Math.round(medianConductor),
      ratio: round(ratio, 3),
      pairRatios: JSON.stringify(conductorRates.map((c, i) => round(c / brokerRates[i]!, 3))),
      target: `ratio >= ${conductorRatioTarget} (issue #25): ${ratio >= conductorRatioTarget ? "met" : "not met"}`,
      batchMax: config.batchMax,
      prefetch: config.prefetch,
    },
  };
  return { report };
}
