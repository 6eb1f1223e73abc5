/**
 * `matchd bench <boundary>`: resolves the bench flags, brings up what the boundary
 * needs (private stack, conductor, outbox), runs it, prints the report (table or
 * JSON, optionally HTML), tears everything down, and exits 1 on a failed invariant.
 */
import { writeFileSync } from "node:fs";
import type { Config } from "../config/schema";
import { createValkey } from "../infra/valkey/client";
import { partitionKeys } from "../infra/valkey/keys";
import { runBrokerEventFloor } from "./broker-event-floor";
import { runBrokerFloor } from "./broker-floor";
import { capacityDefaults, capacityReport } from "./capacity-report";
import { runCellsBench } from "./cells";
import { runDatastoreBench } from "./datastore-bench";
import { runDomainBench, runRestingMemoryBench } from "./domain-bench";
import { collectEnvironment, environmentFacts } from "./environment";
import { runFailoverBench } from "./failover-run";
import { benchProblems } from "./flag-check";
import { runHaCostBench } from "./ha-cost";
import { renderHtmlReport } from "./html-report";
import { runOutboxDrainBench, type SinkMode } from "./outbox-drain";
import {
  type PipelineBoundary,
  purgeCommandQueue,
  resetPartition,
  runPipelineBench,
} from "./pipeline-bench";
import { boundaryRegistry } from "./registry";
import type { BenchReport } from "./report";
import { renderReport } from "./report";
import { fetchMetrics, startService } from "./services";
import { runSoakBench } from "./soak";
import { StackRun } from "./stack-run";

export const benchBoundaries: readonly string[] = boundaryRegistry.map((b) => b.name);

export { benchProblems } from "./flag-check";

export interface BenchRunOptions {
  config: Config;
  env: { datastoreGiven: boolean; brokerGiven: boolean };
  flags: ReadonlyMap<string, string>;
  json: boolean;
  keepStack: boolean;
}

/** Where the event benches' events end up; every event boundary statement names it. */
const sinkQueueStatement =
  "the bench's sink queue (exclusive, or on a broker node list a quorum queue of the run's own; bound to every event exchange, read without acks by the bench's lean AMQP consumer)";

const boundaryStatements: Record<string, string> = {
  conductor:
    "publish to matching:commands.p<N> -> conductor decode, dedup lookup, match, one atomic commit per batch, durability wait, ack + RPC reply; timer stops when every command's durable reply is received (outbox not running)",
  "full-pipeline": `publish -> conductor (as above) -> Valkey stream -> outbox publish with confirms -> event exchanges -> ${sinkQueueStatement}; timer stops when every command's events have been received by the sinks and the stream is drained (the conductor's acknowledgement of the last batch may follow by one durability wait: the outbox reads committed entries without waiting for it)`,
  "round-trip":
    "client view: command sent as RPC (replyTo) -> conductor -> durable commit -> reply received; latency from each command's scheduled send time",
};

/** An integer flag's value, or `fallback`; runBench has checked every one (checkNumbers). */
function intFlag(flags: ReadonlyMap<string, string>, name: string, fallback: number): number {
  const raw = flags.get(name);
  return raw === undefined ? fallback : Number(raw);
}

export async function runBench(boundary: string, options: BenchRunOptions): Promise<number> {
  const { flags } = options;
  const progress = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  const workload = flags.get("--workload") ?? "alternating";
  // Checked by main.ts already; checked again for callers that come here directly.
  const found = benchProblems(boundary, flags, options.env, options.keepStack);
  if (found.length > 0) {
    process.stderr.write(found.map((problem) => `matchd: ${problem}\n`).join(""));
    return 2;
  }
  if (boundary === "failover") return runFailoverBench({ ...options, progress });
  if (boundary === "ha-cost") return runHaCostBench({ ...options, progress });
  if (boundary === "soak") return runSoakBench({ ...options, progress });
  if (boundary === "cells") return runCellsBench({ ...options, progress });
  const seed = intFlag(flags, "--seed", 1);
  if (boundary === "domain") return finish(runDomainBoundary(options, workload, seed), options);
  return await runWithStack(boundary, options, workload, seed, progress);
}

function runDomainBoundary(options: BenchRunOptions, workload: string, seed: number): BenchReport {
  const resting = intFlag(options.flags, "--resting", 0);
  if (resting > 0) return runRestingMemoryBench(resting);
  // Sweep: 2,000 cycles of 101 commands, a timed window of a tenth of a second or more (20,000
  // commands gave windows of ~40 ms, within the machine's noise).
  const commands = intFlag(options.flags, "--commands", workload === "sweep" ? 202_000 : 1_000_000);
  const warmup = intFlag(options.flags, "--warmup", 100_000);
  return runDomainBench({ workload, commands, seed, warmup });
}

function finish(report: BenchReport, options: BenchRunOptions): number {
  process.stdout.write((options.json ? JSON.stringify(report) : renderReport(report)) + "\n");
  return report.invariants.ok ? 0 : 1;
}

async function runWithStack(
  boundary: string,
  options: BenchRunOptions,
  workload: string,
  seed: number,
  progress: (line: string) => void,
): Promise<number> {
  const { config, flags } = options;
  const opened = await StackRun.open({ ...options, progress });
  if (opened === "interrupted") return 130;
  await using run = opened;
  const active = { datastoreUrl: run.datastoreUrl, brokerUrl: run.brokerUrl };
  /** Writes the HTML report if asked, prints the report, and says whether its dir is kept. */
  const finishStackRun = (
    report: BenchReport,
    series: Parameters<typeof renderHtmlReport>[1] | undefined,
  ): number => {
    // An interrupt tore the run down meanwhile: its figures are not a report.
    if (run.tornDown) return 130;
    const reportFile = flags.get("--report");
    if (reportFile) {
      writeFileSync(
        reportFile,
        renderHtmlReport(report, series ?? { timeline: [], histogram: [] }),
      );
      progress(`HTML report written to ${reportFile}`);
    }
    // The per-second series as data, for a caller that runs this bench as a child (soak).
    const seriesFile = flags.get("--series");
    if (seriesFile && series !== undefined) writeFileSync(seriesFile, JSON.stringify(series));
    run.reportHeld(report.invariants.ok);
    return finish(report, options);
  };
  const base = {
    "--datastore-url": active.datastoreUrl,
    "--broker-url": active.brokerUrl,
    "--partition": config.partition,
    "--partition-count": config.partitionCount,
    "--durability": config.durability,
    "--durability-timeout-ms": config.durabilityTimeoutMs,
    "--log-level": config.logLevel,
  };
  const outboxFlags = {
    ...base,
    "--window": config.outboxWindow,
    "--read-count": config.outboxReadCount,
    "--claim-idle-ms": config.outboxClaimIdleMs,
    "--lease-ttl-ms": config.outboxLeaseTtlMs,
  };
  const environment = await collectEnvironment({
    datastoreUrl: active.datastoreUrl,
    brokerUrl: active.brokerUrl,
  });
  const envFacts = Object.fromEntries(environmentFacts(environment));
  const effective: Config = {
    ...config,
    datastoreUrl: active.datastoreUrl,
    brokerUrl: active.brokerUrl,
  };

  let report: BenchReport;
  let series: Parameters<typeof renderHtmlReport>[1] | undefined;
  if (boundary === "datastore") {
    ({ report, series } = await datastoreReport(effective, flags, envFacts, progress));
  } else if (boundary === "broker") {
    report = await brokerReport(effective, flags, seed, envFacts, progress);
  } else if (boundary === "outbox-drain") {
    report = await outboxDrainReport(effective, flags, outboxFlags, envFacts, run, progress);
  } else {
    const capacity = boundary === "capacity";
    const pipelineBoundary = (
      capacity ? (flags.get("--boundary") ?? "full-pipeline") : boundary
    ) as PipelineBoundary;
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
    const valkey = createValkey(active.datastoreUrl, {
      name: "matchd-bench-reset",
      slotKey: partitionKeys(config.partition).ownerEpoch,
    });
    const deleted = await resetPartition(valkey, config.partition);
    valkey.disconnect();
    if (deleted > 0) progress(`deleted ${deleted} leftover keys of partition ${config.partition}`);
    const purged = await purgeCommandQueue(active.brokerUrl, config.partition);
    if (purged > 0)
      progress(`purged ${purged} leftover commands from partition ${config.partition}'s queue`);
    let conductor = conductorUrl;
    if (!conductor) {
      progress("starting conductor");
      const service = await startService(
        "conductor",
        {
          ...base,
          "--batch-max": config.batchMax,
          "--prefetch": config.prefetch,
          "--dedup-retention-s": config.dedupRetentionSeconds,
          "--command-max-bytes": config.commandMaxBytes,
        },
        progress,
        run.register,
        config.httpToken === "" ? {} : { MATCHING_HTTP_TOKEN: config.httpToken },
      );
      conductor = service.url;
    }
    let outbox = outboxUrl;
    if (pipelineBoundary === "full-pipeline" && !outbox) {
      progress("starting outbox");
      const service = await startService("outbox", outboxFlags, progress, run.register);
      outbox = service.url;
    }
    if (capacity) {
      report = await capacityReport({
        pipelineBoundary,
        config: effective,
        urls: {
          datastoreUrl: active.datastoreUrl,
          brokerUrl: active.brokerUrl,
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
      return finishStackRun(report, undefined);
    }
    const defaultCommands = pipelineBoundary === "round-trip" ? 10_000 : 20_000;
    let commands = intFlag(flags, "--commands", defaultCommands);
    const rateFlag = flags.get("--rate");
    const rate =
      rateFlag === undefined
        ? pipelineBoundary === "round-trip"
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
    const result = await runPipelineBench({
      boundary: pipelineBoundary,
      config: effective,
      datastoreUrl: active.datastoreUrl,
      brokerUrl: active.brokerUrl,
      conductorUrl: conductor,
      outboxUrl: outbox,
      workload,
      commands,
      warmup,
      seed,
      rate,
      queryConnections: flags.has("--query-load") ? intFlag(flags, "--query-load", 1) : undefined,
      progress,
    });
    const latencyName =
      pipelineBoundary === "full-pipeline"
        ? rate === undefined
          ? "submit (actual send, closed loop) to the last of the command's events received by a sink queue"
          : "submit (scheduled send) to the last of the command's events received by a sink queue"
        : "submit to durable RPC reply (sent right after the ack)";
    report = {
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
      extra: {
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
        ...(pipelineBoundary === "full-pipeline" ? { outboxWindow: config.outboxWindow } : {}),
        publishCallMs: JSON.stringify(result.publishLatency.percentilesMs()),
        aofRewrites: String(result.facts.aofRewrites),
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
      },
    };
    series = {
      timeline: result.timeline,
      histogram: histogramSeries(result.latency),
      spans: result.spans,
    };
  }
  return finishStackRun(report, series);
}

function describeDurability(config: Config, envFacts: Record<string, string>): string {
  const servers = `datastore ${envFacts["valkey aof"] ?? "aof unknown"}, hz ${envFacts["valkey hz"] ?? "unknown"}`;
  return config.durability === "aof-replicated"
    ? `aof-replicated: ack only after WAITAOF 1 1 confirms primary and replica fsync (timeout ${config.durabilityTimeoutMs} ms); ${servers}`
    : `memory: no durability wait; acknowledged commands can be lost; ${servers}`;
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function histogramSeries(
  histogram: import("./histogram").LatencyHistogram,
): { upperMs: number; count: number }[] {
  // Log-spaced buckets from 0.05 ms, counted from the percentile curve; the last one takes
  // everything slower (up to the maximum), so the series always adds up to every recording.
  const out: { upperMs: number; count: number }[] = [];
  let previous = 0;
  for (let upper = 0.05; upper <= 30_000; upper *= 1.5) {
    const below = histogram.countBelow(upper * 1e6);
    out.push({ upperMs: round(upper, 3), count: below - previous });
    previous = below;
  }
  if (histogram.count > previous) {
    const last = out[out.length - 1]!;
    out.push({
      upperMs: Math.max(round(histogram.max / 1e6, 3), last.upperMs * 1.5),
      count: histogram.count - previous,
    });
  }
  return out;
}

async function brokerReport(
  config: Config,
  flags: ReadonlyMap<string, string>,
  seed: number,
  environment: Record<string, string>,
  progress: (line: string) => void,
): Promise<BenchReport> {
  // --flow was checked by checkFlow before the stack started.
  if (flags.get("--flow") === "events")
    return brokerEventReport(config, flags, environment, progress);
  let commands = intFlag(flags, "--commands", 40_000);
  const warmup = intFlag(flags, "--warmup", 2000);
  const rate = flags.has("--rate") ? intFlag(flags, "--rate", 0) : undefined;
  // checkNumbers refused --duration without --rate.
  if (flags.has("--duration") && rate !== undefined)
    commands = Math.round(rate * intFlag(flags, "--duration", 0));
  const result = await runBrokerFloor({
    rate,
    brokerUrl: config.brokerUrl,
    commands,
    warmup,
    seed,
    prefetch: config.prefetch,
    ackEvery: config.batchMax,
    progress,
  });
  return {
    boundary: "broker",
    boundaryStatement: `the broker alone: publish with confirms -> ${result.queueType} queue with single active consumer (as matching:commands.p<N>) -> consumer that only acknowledges (one multiple-ack per batch of up to ${config.batchMax}, prefetch ${config.prefetch}); no datastore, no matching. The ceiling of the conductor boundary on this broker and machine`,
    durability: "broker only: persistent messages in a quorum queue; no datastore involved",
    workload: `alternating command bodies (${result.bodyBytes} bytes on average)`,
    commands,
    warmup,
    seconds: round(result.seconds, 3),
    commandsPerSecond: Math.round(result.commandsPerSecond),
    latencyMs: result.latencyMs,
    invariants: {
      ok:
        result.received === commands + warmup &&
        result.duplicates === 0 &&
        result.outOfOrder === 0 &&
        result.queueEmptyAfter,
      received: result.received,
      expected: commands + warmup,
      duplicates: result.duplicates,
      outOfOrder: result.outOfOrder,
      queueEmptyAfter: result.queueEmptyAfter,
    },
    environment,
    extra: {
      latencyMeasures:
        rate === undefined
          ? "publish to delivery at the consumer; closed loop publishes the whole run at once, so this is mostly the backlog"
          : "scheduled send to delivery at the consumer",
      offered: rate === undefined ? "closed loop" : `${rate}/s`,
      ...(rate === undefined ? {} : { sendLagMs: JSON.stringify(result.sendLagMs) }),
    },
  };
}

/** `matchd bench broker --flow events`: the outbox's broker traffic alone (see broker-event-floor). */
async function brokerEventReport(
  config: Config,
  flags: ReadonlyMap<string, string>,
  environment: Record<string, string>,
  progress: (line: string) => void,
): Promise<BenchReport> {
  const events = intFlag(flags, "--events", intFlag(flags, "--commands", 100_000));
  const result = await runBrokerEventFloor({
    brokerUrl: config.brokerUrl,
    events,
    window: config.outboxWindow,
    progress,
  });
  return {
    boundary: "broker",
    boundaryStatement: `the broker alone, carrying the outbox's traffic: the outbox's publisher (one confirm channel, persistent, mandatory, messageId, type, x-partition-offset header, up to ${config.outboxWindow} unconfirmed) -> event exchanges -> ${sinkQueueStatement}; no datastore, no stream. The ceiling of the outbox-drain boundary on this broker and machine`,
    durability: "broker only: persistent messages, publisher confirms; no datastore involved",
    workload: `${events} events of the alternating mix (rested, filled, filled, deal), ${result.bodyBytes} bytes on average`,
    unit: "events",
    commands: events,
    warmup: 0,
    seconds: round(result.seconds, 3),
    commandsPerSecond: Math.round(result.eventsPerSecond),
    latencyMs: result.confirmLatencyMs,
    invariants: {
      ok: result.received === events && result.duplicates === 0 && result.notAcked === 0,
      received: result.received,
      expected: events,
      duplicates: result.duplicates,
      notAcked: result.notAcked,
    },
    environment,
    extra: {
      flow: "events",
      window: String(config.outboxWindow),
      latencyMeasures: "publish to broker confirm, per event",
    },
  };
}

async function datastoreReport(
  config: Config,
  flags: ReadonlyMap<string, string>,
  environment: Record<string, string>,
  progress: (line: string) => void,
): Promise<{ report: BenchReport; series: Parameters<typeof renderHtmlReport>[1] }> {
  const transactions = intFlag(flags, "--commands", 5000);
  const connectionsFlag = flags.get("--connections");
  const connections = connectionsFlag === undefined ? [1, 8] : [intFlag(flags, "--connections", 1)];
  const result = await runDatastoreBench({
    datastoreUrl: config.datastoreUrl,
    transactions,
    connections,
    durabilityTimeoutMs: config.durabilityTimeoutMs,
    log: progress,
  });
  const durable = result.rows.find(
    (r) => r.policy === "aof-replicated" && r.connections === connections[0],
  )!;
  const extra: BenchReport["extra"] = {};
  for (const row of result.rows) {
    extra[`${row.policy} x${row.connections} tx/s`] = Math.round(row.txPerSecond);
    extra[`${row.policy} x${row.connections} latency ms`] = JSON.stringify(row.latencyMs);
  }
  extra["durability wait alone ms"] = JSON.stringify(result.waitDurableMs);
  const committedAsMade = result.rows.every((row) => row.committed === row.commitsMade);
  extra["server appendfsync"] = String(result.server.appendfsync);
  const report: BenchReport = {
    boundary: "datastore",
    boundaryStatement:
      "MULTI; HSET order; ZADD book; XADD event; SET processed-command EX; EXEC, sequential per connection, one partition key space per connection; under aof-replicated each EXEC is followed by the durability wait (WAITAOF 1 1 in short slices); the memory rows skip that wait but the server still runs its own appendfsync (shown below)",
    durability: "both: memory and aof-replicated rows below",
    workload: "synthetic commit shape of one command",
    unit: "transactions",
    commands: durable.transactions,
    warmup: 0,
    seconds: round(durable.seconds, 3),
    commandsPerSecond: Math.round(durable.txPerSecond),
    latencyMs: durable.latencyMs,
    invariants: {
      ok:
        result.durabilityTimeouts === 0 &&
        committedAsMade &&
        result.server.replicasBefore >= 1 &&
        result.server.replicasAfter >= 1 &&
        result.keysLeft === 0,
      durabilityTimeouts: result.durabilityTimeouts,
      everyCommitWritten: committedAsMade,
      commitsWritten: result.rows.reduce((sum, row) => sum + row.committed, 0),
      replicasBefore: result.server.replicasBefore,
      replicasAfter: result.server.replicasAfter,
      keysLeftBehind: result.keysLeft,
    },
    environment,
    extra,
  };
  return { report, series: durable.series };
}

async function outboxDrainReport(
  config: Config,
  flags: ReadonlyMap<string, string>,
  /** The outbox's flags (stack URLs, partition, policy, window, read count). */
  outboxFlags: Record<string, string | number>,
  environment: Record<string, string>,
  services: Pick<StackRun, "register" | "forget">,
  progress: (line: string) => void,
): Promise<BenchReport> {
  const events = intFlag(flags, "--events", intFlag(flags, "--commands", 100_000));
  // checkSink has refused anything else.
  const sink: SinkMode = flags.get("--sink") === "queued" ? "queued" : "live";
  const result = await runOutboxDrainBench({
    config,
    events,
    sink,
    window: config.outboxWindow,
    log: progress,
    startOutbox: async (extraArgs) => {
      const extra: Record<string, string> = {};
      for (let i = 0; i + 1 < extraArgs.length; i += 2) extra[extraArgs[i]!] = extraArgs[i + 1]!;
      const service = await startService(
        "outbox",
        { ...outboxFlags, ...extra },
        progress,
        services.register,
      );
      return {
        metricsUrl: `${service.url}/metrics`,
        stop: async () => {
          await service.stop();
          services.forget(service);
        },
      };
    },
  });
  return outboxDrainToReport(result, config, environment, events);
}

export function outboxDrainToReport(
  result: Record<string, unknown>,
  config: Config,
  environment: Record<string, string>,
  events: number,
): BenchReport {
  const num = (key: string) => (typeof result[key] === "number" ? (result[key] as number) : -1);
  const confirm = (result.confirmLatencySeconds ?? {}) as Record<string, number | undefined>;
  const ms = (seconds: number | undefined) =>
    seconds === undefined ? -1 : Math.round(seconds * 1e6) / 1e3;
  const received = num("received");
  const retries = num("publishRetries");
  const deadLetters = num("deadLetters");
  // Confirmed publishes, copies included: a republish after a failed stream acknowledgement
  // counts no retry, and its copy may reach the sink only after the counts were read (or,
  // with a queued sink, never be read at all), so this is what shows it.
  const published = num("published");
  const durabilityTimeouts = num("durabilityTimeouts");
  // No sample proves nothing: under aof-replicated a missing one fails too.
  const replicaConnected =
    config.durability !== "aof-replicated" ||
    (num("replicaSamples") > 0 && num("minReplicasConnected") >= 1);
  const extra: BenchReport["extra"] = {
    window: config.outboxWindow,
    readCount: config.outboxReadCount,
    backlogWriteSeconds: num("backlogWriteSeconds"),
    outboxStartSeconds: num("outboxStartSeconds"),
    firstReadSeconds: num("firstReadSeconds"),
    sink: result.sink === "queued" ? "queued" : "live",
    firstEventSeconds: num("firstEventSeconds"),
    lastEventSeconds: num("lastEventSeconds"),
    sinkReadSeconds: num("sinkReadSeconds"),
    unroutable: num("unroutable"),
    foreignMessages: num("foreignMessages"),
    confirmLatencyNote:
      "from the outbox's confirm histogram, ten buckets a decade: each percentile is its bucket's upper bound (at most 28 % above the true value), capped at the max",
  };
  return {
    boundary: "outbox-drain",
    boundaryStatement: `a backlog of N events already in the partition's Valkey stream -> outbox (lease, XREADGROUP, publish with confirms in a sliding window, XACK+XDEL of the confirmed prefix) -> event exchanges -> ${sinkQueueStatement}; timer runs from the outbox's first read (the last poll, every 5 ms, that saw its consumer group read nothing) until XLEN is 0 and ${
      result.sink === "queued"
        ? "the sink's queue holds every event (read by the sink and checked after the timed window)"
        : "the sink, reading throughout, has received every event"
    }`,
    durability: `${config.durability} (checked at outbox boot; under aof-replicated the replica is sampled every 250 ms through the drain, and the outbox may count no durability timeout); the stream is acknowledged only after broker confirms`,
    workload: `${events} events of the alternating mix (rested, filled, filled, deal)`,
    unit: "events",
    commands: events,
    warmup: 0,
    seconds: num("drainSeconds"),
    commandsPerSecond: num("eventsPerSecond"),
    latencyMs: {
      p50: ms(confirm.p50),
      p95: ms(confirm.p95),
      p99: ms(confirm.p99),
      p999: ms(confirm.p999),
      max: ms(confirm.max),
    },
    invariants: {
      ok:
        received === events &&
        published === events &&
        num("duplicates") === 0 &&
        retries === 0 &&
        deadLetters === 0 &&
        durabilityTimeouts === 0 &&
        replicaConnected,
      eventsReceivedBySinks: received,
      eventsExpected: events,
      eventsPublished: published,
      duplicatesReceived: num("duplicates"),
      outboxRetries: retries,
      outboxDeadLetters: deadLetters,
      outboxDurabilityTimeouts: durabilityTimeouts,
      ...(config.durability === "aof-replicated"
        ? { replicaConnectedThroughout: replicaConnected, replicaSamples: num("replicaSamples") }
        : {}),
    },
    environment,
    extra,
  };
}
