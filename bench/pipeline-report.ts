/**
 * The pipeline boundaries' reports (conductor, full-pipeline, round-trip) and the capacity
 * search's: the partition reset, the services started unless given by URL, then the timed
 * run (pipeline-bench.ts) or the search (capacity-report.ts) assembled into a report.
 */

import type { Config } from "../src/config/schema";
import { createValkey } from "../src/infra/valkey/client";
import { partitionKeys } from "../src/infra/valkey/keys";
import { capacityDefaults, capacityReport } from "./capacity-report";
import { type Floor, measureFloor, overFloor } from "./floor";
import type { LatencyHistogram, Percentiles } from "./histogram";
import {
  type PipelineBoundary,
  type PipelineResult,
  purgeCommandQueue,
  resetPartition,
  runPipelineBench,
} from "./pipeline-bench";
import type { BenchReport } from "./report";
import { fetchMetrics, startService } from "./services";
import {
  describeDurability,
  histogramSeries,
  intFlag,
  round,
  type StackContext,
  type StackReport,
  sinkQueueStatement,
} from "./stack-boundary";

const boundaryStatements: Record<PipelineBoundary, string> = {
  conductor:
    "publish to matching:commands.p<N> -> conductor decode, dedup lookup, match, one atomic commit per batch, durability wait, ack + RPC reply; timer stops when every command's durable reply is received (outbox not running)",
  "full-pipeline": `publish -> conductor (as above) -> Valkey stream -> outbox publish with confirms -> event exchanges -> ${sinkQueueStatement}; timer stops when every command's events have been received by the sinks and the stream is drained (the conductor's acknowledgement of the last batch may follow by one durability wait: the outbox reads committed entries without waiting for it)`,
  "round-trip":
    "client view: command sent as RPC (replyTo) -> conductor -> durable commit -> reply received; latency from each command's scheduled send time",
};

export interface Services {
  conductor: string;
  outbox: string | undefined;
}

/**
 * The services a pipeline run needs, on a clean partition: those given by URL must run the
 * bench's durability policy; the others are started on the stack.
 */
export async function pipelineServices(
  context: StackContext,
  pipelineBoundary: PipelineBoundary,
): Promise<Services> {
  const { config, flags, progress } = context;
  const conductorUrl = flags.get("--conductor-url");
  const outboxUrl = flags.get("--outbox-url");
  // A running service given by URL reports its own policy: the report's durability label
  // and its replica check follow the bench's, so the two must agree, and are checked
  // before the partition is reset under the service.
  for (const [name, url] of [
    ["conductor", conductorUrl],
    ["outbox", pipelineBoundary === "full-pipeline" ? outboxUrl : undefined],
  ] as const) {
    if (url === undefined) continue;
    const policy = (await fetchMetrics(url)).matching_durability_policy as
      | { policy?: unknown }
      | undefined;
    if (policy?.policy !== config.durability) {
      throw new Error(
        `the ${name} at ${url} runs durability policy ${String(policy?.policy)}, the bench ${config.durability}; pass --durability ${String(policy?.policy)}`,
      );
    }
  }
  const valkey = createValkey(config.datastoreUrl, {
    name: "matchd-bench-reset",
    slotKey: partitionKeys(config.partition).ownerEpoch,
  });
  const deleted = await resetPartition(valkey, config.partition);
  valkey.disconnect();
  if (deleted > 0) progress(`deleted ${deleted} leftover keys of partition ${config.partition}`);
  const purged = await purgeCommandQueue(config.brokerUrl, config.partition);
  if (purged > 0)
    progress(`purged ${purged} leftover commands from partition ${config.partition}'s queue`);
  let conductor = conductorUrl;
  if (!conductor) {
    progress("starting conductor");
    const service = await startService(
      "conductor",
      {
        ...context.serviceFlags,
        "--batch-max": config.batchMax,
        "--prefetch": config.prefetch,
        "--dedup-retention-s": config.dedupRetentionSeconds,
        "--command-max-bytes": config.commandMaxBytes,
      },
      progress,
      context.run.register,
      config.httpToken === "" ? {} : { MATCHING_HTTP_TOKEN: config.httpToken },
    );
    conductor = service.url;
  }
  let outbox = outboxUrl;
  if (pipelineBoundary === "full-pipeline" && !outbox) {
    progress("starting outbox");
    const service = await startService(
      "outbox",
      context.outboxFlags,
      progress,
      context.run.register,
    );
    outbox = service.url;
  }
  return { conductor, outbox };
}

/** The capacity search on the services: its steps are pipeline runs of `--boundary`. */
export async function capacityStackReport(context: StackContext): Promise<StackReport> {
  const { config, flags, progress, envFacts } = context;
  const pipelineBoundary = (flags.get("--boundary") ?? "full-pipeline") as PipelineBoundary;
  const { conductor, outbox } = await pipelineServices(context, pipelineBoundary);
  const seed = intFlag(flags, "--seed", 1);
  const report = await capacityReport({
    pipelineBoundary,
    config: config,
    urls: {
      datastoreUrl: config.datastoreUrl,
      brokerUrl: config.brokerUrl,
      conductorUrl: conductor,
      outboxUrl: outbox,
    },
    seed,
    p99Ms: intFlag(flags, "--p99-ms", capacityDefaults.p99Ms),
    stepSeconds: intFlag(flags, "--step-seconds", capacityDefaults.stepSeconds),
    startRate: intFlag(flags, "--rate", capacityDefaults.startRate),
    environment: envFacts,
    durability: describeDurability(config, envFacts),
    progress,
  });
  return { report };
}

/** One timed pipeline run of `boundary` on the services. */
export async function pipelineStackReport(
  context: StackContext,
  boundary: PipelineBoundary,
): Promise<StackReport> {
  return pipelineRunReport(context, boundary, await pipelineServices(context, boundary));
}

/** The run's size from its flags: commands, warm-up and rate, each boundary's defaults. */
function pipelineRunSize(flags: ReadonlyMap<string, string>, boundary: PipelineBoundary) {
  const seed = intFlag(flags, "--seed", 1);
  const workload = flags.get("--workload") ?? "alternating";
  const defaultCommands = boundary === "round-trip" ? 10_000 : 20_000;
  let commands = intFlag(flags, "--commands", defaultCommands);
  const rateFlag = flags.get("--rate");
  const rate =
    rateFlag === undefined
      ? boundary === "round-trip"
        ? 1000
        : undefined
      : intFlag(flags, "--rate", 0);
  // checkNumbers refused --duration without a rate (round-trip defaults to one).
  if (flags.has("--duration") && rate !== undefined)
    commands = Math.round(rate * intFlag(flags, "--duration", 0));
  let warmup = intFlag(flags, "--warmup", Math.min(2000, commands));
  if (workload === "alternating") {
    // Bid/ask pairs: an odd count would leave one order resting.
    commands += commands % 2;
    warmup += warmup % 2;
  }
  return { seed, workload, commands, warmup, rate, wallClock: flags.get("--clock") === "wall" };
}

/** The report's extra figures: what was offered, the settings, and what the services did. */
function pipelineExtras(
  result: PipelineResult,
  config: Config,
  boundary: PipelineBoundary,
  latencyName: string,
  rate: number | undefined,
): BenchReport["extra"] {
  return {
    latencyMeasures: latencyName,
    commandMix: String(result.facts.commandMix),
    fillCounts: String(result.facts.fillCounts),
    bookAtEnd: String(result.facts.bookAtEnd),
    offered:
      rate === undefined
        ? "closed loop (publish as fast as the broker accepts)"
        : `${rate} commands/s`,
    batchMax: config.batchMax,
    prefetch: config.prefetch,
    ...(boundary === "full-pipeline" ? { outboxWindow: config.outboxWindow } : {}),
    publishCallMs: JSON.stringify(result.publishLatency.percentilesMs()),
    aofRewrites: String(result.facts.aofRewrites),
    ...rewriteSplitExtras(result),
    traceBreakdown: String(result.facts.traceBreakdown),
    gcCollections: String(result.facts.gcCollections),
    crossed: String(result.facts.crossed),
    cpuSeconds: String(result.facts.cpuSeconds),
    ...(result.facts.cpuNotMeasured === undefined
      ? {}
      : { cpuNotMeasured: String(result.facts.cpuNotMeasured) }),
    maxCommandQueueDepth: result.facts.maxQueueDepth as number,
    maxEventStreamLength: result.facts.maxStreamLength as number,
    stages: JSON.stringify(result.stages),
    ...(result.queries === undefined
      ? {}
      : {
          queryLoad: `${result.queries.connections} connections sending the conductor's queries back to back from the bench process: ${result.queries.requests} requests (${result.queries.perSecond}/s), ${result.queries.errors} errors, latency ms ${JSON.stringify(result.queries.latencyMs)}`,
        }),
    // The services' histograms are cumulative: they cannot be cut at the warm-up.
    stagesCover:
      "every command the services processed since they started (prefill and warm-up included)",
  };
}

/** One timed pipeline run of `boundary` on services already running. */
export async function pipelineRunReport(
  context: StackContext,
  boundary: PipelineBoundary,
  { conductor, outbox }: Services,
): Promise<StackReport> {
  const { config, flags, progress, envFacts } = context;
  const pipelineBoundary = boundary;
  const { seed, workload, commands, warmup, rate, wallClock } = pipelineRunSize(flags, boundary);
  const result = await runPipelineBench({
    boundary: pipelineBoundary,
    config: config,
    datastoreUrl: config.datastoreUrl,
    brokerUrl: config.brokerUrl,
    conductorUrl: conductor,
    outboxUrl: outbox,
    workload,
    commands,
    warmup,
    seed,
    rate,
    wallClock,
    queryConnections: flags.has("--query-load") ? intFlag(flags, "--query-load", 1) : undefined,
    progress,
  });
  const latencyName =
    pipelineBoundary === "full-pipeline"
      ? rate === undefined
        ? "submit (actual send, closed loop) to the last of the command's events received by a sink queue"
        : "submit (scheduled send) to the last of the command's events received by a sink queue"
      : "submit to durable RPC reply (sent right after the ack)";
  const report: BenchReport = {
    boundary,
    boundaryStatement: boundaryStatements[boundary]!,
    durability: describeDurability(config, envFacts),
    workload,
    workloadDescription: String(result.facts.workloadDescription),
    commands: result.commands,
    warmup,
    seconds: round(result.seconds, 3),
    commandsPerSecond: Math.round(result.commands / result.seconds),
    latencyMs: result.latency.percentilesMs(),
    invariants: result.invariants,
    checks: result.checks,
    environment: envFacts,
    extra: pipelineExtras(result, config, pipelineBoundary, latencyName, rate),
  };
  const floorSeconds = intFlag(flags, "--floor-seconds", defaultFloorSeconds);
  if (boundary !== "conductor" && rate !== undefined && floorSeconds > 0) {
    // After the run, never beside it: the legs would share the cores with the path.
    const floor = await measureFloor(boundary, {
      config,
      rate,
      samples: Math.min(commands, rate * floorSeconds),
      seed,
      progress,
    });
    Object.assign(report.extra, floorExtras(floor, report.latencyMs, floorSeconds));
  }
  const series = {
    timeline: result.timeline,
    histogram: histogramSeries(result.latency),
    spans: result.spans,
  };
  return { report, series };
}

/** How long each leg of the floor is offered the run's rate, unless --floor-seconds says. */
const defaultFloorSeconds = 10;

/** The floor beside the path: each leg, their sum, and the path over it. */
function floorExtras(floor: Floor, path: Percentiles, seconds: number): BenchReport["extra"] {
  return {
    floorLegs: floor.legs
      .map(
        (leg) =>
          `${leg.name}: p50 ${leg.latencyMs.p50} p99 ${leg.latencyMs.p99} ms (${leg.samples})`,
      )
      .join("; "),
    floorSumMs: `p50 ${floor.sum.p50}, p99 ${floor.sum.p99} (each leg alone, ${seconds} s at the run's rate, after it)`,
    pathOverFloor: overFloor(path, floor, 2),
  };
}

/** p50 and p99 of the commands in flight during an AOF rewrite, and of the others. */
export function rewriteSplitExtras(result: PipelineResult): BenchReport["extra"] {
  const line = (histogram: LatencyHistogram) => {
    if (histogram.count === 0) return "no command";
    const { p50, p99 } = histogram.percentilesMs();
    return `p50 ${p50} p99 ${p99} ms (${histogram.count} commands)`;
  };
  return {
    latencyDuringRewrites: line(result.rewriteSplit.during),
    latencyOutsideRewrites: line(result.rewriteSplit.outside),
  };
}
