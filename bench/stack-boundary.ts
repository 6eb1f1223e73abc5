/**
 * What every boundary run on a stack shares: the private stack opened as an `await using`
 * resource (or the URLs given), the environment read from it, the flags each service started
 * on it takes, and the end of the run (HTML report, series file, printed report, exit code).
 */
import { writeFileSync } from "node:fs";
import type { Config } from "../src/config/schema";
import { ExitCode } from "../src/infra/exit-codes";
import { collectEnvironment, environmentFacts } from "./environment";
import type { LatencyHistogram } from "./histogram";
import { renderHtmlReport } from "./html-report";
import type { BenchReport } from "./report";
import { renderReport } from "./report";
import type { ReportSeries } from "./series-recorder";
import { StackRun } from "./stack-run";

export interface BenchRunOptions {
  config: Config;
  env: { datastoreGiven: boolean; brokerGiven: boolean };
  flags: ReadonlyMap<string, string>;
  json: boolean;
  keepStack: boolean;
}

export interface BoundaryRunOptions extends BenchRunOptions {
  progress: (line: string) => void;
}

export interface StackContext {
  options: BoundaryRunOptions;
  flags: ReadonlyMap<string, string>;
  /** The configuration, with the stack's datastore and broker URLs. */
  config: Config;
  run: StackRun;
  /** The environment as label/value facts (machine, servers and their settings). */
  envFacts: Record<string, string>;
  progress: (line: string) => void;
  /** The flags a conductor started on this stack takes (an outbox takes outboxFlags). */
  serviceFlags: Record<string, string | number>;
  outboxFlags: Record<string, string | number>;
}

export interface StackReport {
  report: BenchReport;
  series?: ReportSeries;
}

/** Where the event benches' events end up; every event boundary statement names it. */
export const sinkQueueStatement =
  "the bench's sink queue (exclusive, or on a broker node list a quorum queue of the run's own; bound to every event exchange, read without acks by the bench's lean AMQP consumer)";

export { intFlag } from "./boundary";

/** Prints the report (table or JSON); the exit code says whether its invariants held. */
export function printReport(report: BenchReport, options: BenchRunOptions): number {
  process.stdout.write((options.json ? JSON.stringify(report) : renderReport(report)) + "\n");
  return report.invariants.ok ? 0 : 1;
}

/** Opens the stack, builds the boundary's report on it, and ends the run (130 on a signal). */
export async function runOnStack(
  options: BoundaryRunOptions,
  build: (context: StackContext) => Promise<StackReport>,
): Promise<number> {
  const { flags, progress } = options;
  const opened = await StackRun.open(options);
  if (opened === "interrupted") return ExitCode.interrupted;
  await using run = opened;
  const config: Config = {
    ...options.config,
    datastoreUrl: run.datastoreUrl,
    brokerUrl: run.brokerUrl,
  };
  const environment = await collectEnvironment({
    datastoreUrl: config.datastoreUrl,
    brokerUrl: config.brokerUrl,
  });
  const serviceFlags = {
    "--datastore-url": config.datastoreUrl,
    "--broker-url": config.brokerUrl,
    "--partition": config.partition,
    "--partition-count": config.partitionCount,
    "--durability": config.durability,
    "--durability-timeout-ms": config.durabilityTimeoutMs,
    "--log-level": config.logLevel,
  };
  const outboxFlags = {
    ...serviceFlags,
    "--window": config.outboxWindow,
    "--read-count": config.outboxReadCount,
    "--claim-idle-ms": config.outboxClaimIdleMs,
    "--lease-ttl-ms": config.outboxLeaseTtlMs,
  };
  const envFacts = Object.fromEntries(environmentFacts(environment));
  const context = { options, flags, config, run, envFacts, progress, serviceFlags, outboxFlags };
  const { report, series } = await build(context);
  // An interrupt tore the run down meanwhile: its figures are not a report.
  if (run.tornDown) return ExitCode.interrupted;
  writeReportFiles(flags, report, series, progress);
  run.reportHeld(report.invariants.ok);
  return printReport(report, options);
}

/** The HTML report (--report) and, for a caller running this bench as a child, the series. */
function writeReportFiles(
  flags: ReadonlyMap<string, string>,
  report: BenchReport,
  series: ReportSeries | undefined,
  progress: (line: string) => void,
): void {
  const reportFile = flags.get("--report");
  if (reportFile) {
    writeFileSync(reportFile, renderHtmlReport(report, series ?? { timeline: [], histogram: [] }));
    progress(`HTML report written to ${reportFile}`);
  }
  const seriesFile = flags.get("--series");
  if (seriesFile && series !== undefined) writeFileSync(seriesFile, JSON.stringify(series));
}

export function describeDurability(config: Config, envFacts: Record<string, string>): string {
  const servers = `datastore ${envFacts["valkey aof"] ?? "aof unknown"}, hz ${envFacts["valkey hz"] ?? "unknown"}`;
  return config.durability === "aof-replicated"
    ? `aof-replicated: ack only after WAITAOF 1 1 confirms primary and replica fsync (timeout ${config.durabilityTimeoutMs} ms); ${servers}`
    : `memory: no durability wait; acknowledged commands can be lost; ${servers}`;
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function histogramSeries(histogram: LatencyHistogram): { upperMs: number; count: number }[] {
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
