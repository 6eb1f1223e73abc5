/**
 * The soak's report: which series were judged and whether each stayed flat once the dedup
 * window was crossed, bytes per command while it filled, the projected time to exhaust memory
 * and disk, p50/p99 per minute, the durability wait around each AOF rewrite, and the
 * invariants (the full pipeline's own, and boundedness).
 */

import type { SoakRun } from "./soak";
import {
  backlogGrowthSeconds,
  flatGrowthPercent,
  judgeSeries,
  perMinute,
  perMinuteFloor,
  quantileBound,
  type RewriteWindow,
  restartSpan,
  rewriteWindows,
  type SeriesVerdict,
  spansOf,
  stepPoints,
  waitAwayFromRewrites,
} from "./soak-analysis";
import type { SoakSample } from "./soak-sampler";
import { allStalls, stallTable } from "./soak-stalls";

/** The full pipeline's checks that a replica's restart fails by stalling, not by losing. */
const stallsOfARestart = [
  "replicaConnectedThroughout",
  "commandFailures",
  "durabilityTimeouts",
  "outboxDurabilityTimeouts",
];

/** Target: the durability wait's p99.9 around each rewrite (issue #27). */
export const rewriteWaitTargetMs = 50;

type Series = [
  name: string,
  unit: SeriesVerdict["unit"],
  read: (s: SoakSample) => number,
  /** Events (or commands) a second of offered load adds to a backlog: judged by count. */
  backlogPerSecondOfLoad?: number,
  /**
   * "sawtooth" (a heap): judged by its per-minute floor; "steps" (an AOF's size after its last
   * rewrite): by its value at each rewrite.
   */
  shape?: "sawtooth" | "steps",
];

const pointsToJudge = (points: [number, number][], shape: Series[4]) =>
  shape === "sawtooth" ? perMinuteFloor(points) : shape === "steps" ? stepPoints(points) : points;

function seriesOf(samples: readonly SoakSample[], rate: number): Series[] {
  const first = samples[0];
  if (first === undefined) return [];
  const series: Series[] = [];
  for (const server of Object.keys(first.servers)) {
    series.push([`valkey ${server} used_memory`, "bytes", (s) => s.servers[server]!.usedMemory]);
    series.push([`valkey ${server} keys`, "keys", (s) => s.servers[server]!.keys]);
    series.push([
      `valkey ${server} AOF after its last rewrite`,
      "bytes",
      (s) => s.servers[server]!.aofBaseBytes,
      undefined,
      "steps",
    ]);
  }
  for (const name of Object.keys(first.rssBytes))
    series.push([`${name} RSS`, "bytes", (s) => s.rssBytes[name] ?? 0, undefined, rssShape(name)]);
  for (const name of Object.keys(first.heapBytes))
    series.push([
      `${name} heap used`,
      "bytes",
      (s) => s.heapBytes[name] ?? 0,
      undefined,
      "sawtooth",
    ]);
  const allowance = backlogGrowthSeconds * rate;
  series.push(["event stream length", "entries", (s) => s.streamLength, 5 * allowance]);
  series.push(["command queue depth", "messages", (s) => s.queueDepth, allowance]);
  return series;
}

/**
 * RabbitMQ's RSS is a sawtooth: each quorum WAL file's entries stay in memory until the file
 * rolls over at 64 MB (docs/operations.md, RabbitMQ): about every 40 s at the ~1.5 MB/s a
 * 2,000 commands/s soak writes to it.
 */
const rssShape = (process: string): Series[4] => (process === "rabbitmq" ? "sawtooth" : undefined);

/** Each series' verdict: growth per command while the window fills, and over the judged span. */
export function seriesVerdicts(
  samples: readonly SoakSample[],
  rate: number,
  spans: ReturnType<typeof spansOf>,
): SeriesVerdict[] {
  return seriesOf(samples, rate).map(([name, unit, read, allowance, shape]) => {
    const points = samples.map((s): [number, number] => [s.t, read(s)]);
    return judgeSeries(name, unit, pointsToJudge(points, shape), rate, spans, allowance);
  });
}

function hoursUntil(free: number, slopePerSecond: number): number | "never (bounded)" {
  return slopePerSecond <= 0
    ? "never (bounded)"
    : Math.round((free / slopePerSecond / 3600) * 10) / 10;
}

export function buildSoakReport(run: SoakRun) {
  const rate = run.flags["--rate"];
  const duration = run.flags["--duration"];
  const spans = spansOf(run.windowSeconds, duration);
  const verdicts = seriesVerdicts(run.samples, rate, spans);
  const judged = spans.judged !== undefined;
  const unbounded = verdicts.filter((v) => v.bounded === false).map((v) => v.name);
  // Memory: every process's RSS (a server's RSS holds its used_memory). Disk: both AOFs.
  const slopeOf = (test: (v: SeriesVerdict) => boolean) =>
    verdicts.filter(test).reduce((sum, v) => sum + Math.max(0, v.slopePerSecond ?? 0), 0);
  const memorySlope = slopeOf((v) => v.name.endsWith(" RSS"));
  const diskSlope = slopeOf((v) => v.name.includes("AOF"));
  const restart = run.replicaRestart;
  const restarting =
    restart === undefined
      ? undefined
      : restartSpan(run.samples, restart.killedAtS, restart.onlineAgainAtS, rate);
  const rewrites = rewriteWindows(run.samples, restarting);
  // The target holds for the automatic rewrites; one beside a restart is judged with it.
  const judgedRewrites = rewrites.filter((r) => !r.duringReplicaRestart);
  const worstRewriteWait = Math.max(0, ...judgedRewrites.map((r) => r.durabilityWaitP999Ms));
  const last = run.samples[run.samples.length - 1];
  const allWaits = last === undefined ? [] : last.durabilityWait;
  // The full pipeline's failed checks. A replica restarted on purpose stalls acknowledgements
  // and publication (durability waits time out and batches are retried): those checks count
  // stalls, not losses, and are expected then; every check of what was lost still holds.
  const failedChecks = Object.keys(run.pipeline.invariants)
    .filter((key) => key.endsWith("Failed"))
    .map((key) => key.slice(0, -"Failed".length))
    .filter((name) => !(restart !== undefined && stallsOfARestart.includes(name)));
  const pipelineOk = run.pipeline.exitCode <= 1 && failedChecks.length === 0;
  const replicaBack =
    restart === undefined || (restart.onlineAgainAtS !== undefined && !restart.error);
  const invariants = {
    ok: pipelineOk && unbounded.length === 0 && replicaBack,
    fullPipelineInvariants: pipelineOk,
    fullPipelineFailedChecks: failedChecks.join(", ") || "none",
    seriesGrowingPastTheWindow: judged ? unbounded.join(", ") || "none" : "not judged",
    seriesGrowingPastTheWindowOk: unbounded.length === 0,
    ...(restart === undefined ? {} : { replicaOnlineAgainAfterItsRestart: replicaBack }),
  };
  return {
    boundary: "soak",
    boundaryStatement:
      "bench full-pipeline open loop (its conductor and outbox started by the soak, its own invariants), sampled every few seconds: Valkey memory, keys and AOF on primary and replica, stream length, command queue depth, every process's RSS and the services' heaps",
    durability: "aof-replicated",
    workload: run.flags["--workload"],
    offered: `${rate} commands/s for ${duration} s`,
    dedupWindowSeconds: run.windowSeconds,
    crossedTheWindow: judged
      ? `yes: judged from ${spans.judged![0]} s to ${spans.judged![1]} s (flat: under ${flatGrowthPercent} % growth by linear fit)`
      : `no: the run is too short to judge past a ${run.windowSeconds} s window (it needs the window + 180 s); no series is judged`,
    achievedCommandsPerSecond: run.pipeline.commandsPerSecond,
    latencyMs: run.pipeline.latencyMs,
    series: verdicts,
    projection: {
      memoryAvailableAtStartBytes: run.memAvailableBytes,
      hoursUntilMemoryIsExhausted: judged
        ? hoursUntil(run.memAvailableBytes, memorySlope)
        : "not judged",
      diskFreeAtStartBytes: run.diskFreeBytes,
      hoursUntilDiskIsFull: judged ? hoursUntil(run.diskFreeBytes, diskSlope) : "not judged",
    },
    aofRewrites: rewrites,
    valkeyStalls: stallTable(allStalls(run.samples), judgedRewrites),
    durabilityWaitMs: {
      p999WholeRun: quantileBound(allWaits, 0.999) * 1000,
      worstP999AroundARewrite: worstRewriteWait,
      rewritesJudged: judgedRewrites.length,
      rewritesDuringTheReplicaRestart: rewrites.length - judgedRewrites.length,
      replicaRestartSpanS: restarting ?? "none",
      awayFromRewrites: waitAwayFromRewrites(run.samples, restarting),
      worstForkMs: Math.max(0, ...rewrites.map((r) => r.forkMs)),
      targetAroundRewritesMs: rewriteWaitTargetMs,
      targetMet: judgedRewrites.length > 0 && worstRewriteWait <= rewriteWaitTargetMs,
    },
    durabilityTimeouts: last?.durabilityTimeouts ?? 0,
    replicaRestart: restart ?? "none (--restart-replica-at not given)",
    maxStreamLength: Math.max(0, ...run.samples.map((s) => s.streamLength)),
    maxCommandQueueDepth: Math.max(0, ...run.samples.map((s) => s.queueDepth)),
    restingOrders: restingOrdersOver(run.samples, spans.judged),
    perMinute: perMinute(run.timeline),
    samples: run.samples.map(({ durabilityWait: _buckets, ...rest }) => rest),
    invariants,
    pipelineInvariants: run.pipeline.invariants,
    environment: run.environment,
  };
}

export type SoakReport = ReturnType<typeof buildSoakReport>;

/**
 * The resting orders at the start and end of the run and of the judged span: the books' own
 * growth, beside which a Valkey series judged growing reads (state, not a leak).
 */
function restingOrdersOver(samples: readonly SoakSample[], judged: [number, number] | undefined) {
  const at = (t: number) => samples.find((s) => s.t >= t)?.restingOrders;
  return {
    first: samples[0]?.restingOrders ?? 0,
    last: samples[samples.length - 1]?.restingOrders ?? 0,
    judgedSpan:
      judged === undefined
        ? "not judged"
        : `${at(judged[0]) ?? "-"} at ${judged[0]} s, ${samples[samples.length - 1]?.restingOrders ?? "-"} at the end`,
  };
}

/** The durability wait's verdict: the whole run, around rewrites, and away from them. */
export function describeWaits(waits: SoakReport["durabilityWaitMs"]): string {
  const away = waits.awayFromRewrites;
  const restart = waits.rewritesDuringTheReplicaRestart;
  return [
    `wait p99.9 <= ${waits.p999WholeRun} ms over the run`,
    `<= ${waits.worstP999AroundARewrite} ms around the worst of ${waits.rewritesJudged} rewrites${restart > 0 ? ` (${restart} more during the replica restart, not judged)` : ""}, target ${waits.targetAroundRewritesMs} ms: ${waits.targetMet ? "met" : "not met"}`,
    `away from rewrites ${away.windows} windows: median ${away.medianP999Ms ?? "-"} ms, worst ${away.worstP999Ms ?? "-"} ms`,
    `slowest fork ${waits.worstForkMs.toFixed(1)} ms`,
  ].join("; ");
}

export const describeStall = (stall: RewriteWindow["worstStall"]) =>
  stall === undefined
    ? "no stall recorded"
    : `worst stall ${stall.server} ${stall.event} ${stall.ms} ms`;

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const num = (value: number | undefined, digits = 1) =>
  value === undefined ? "-" : value.toFixed(digits);

export function renderSoakReport(report: SoakReport): string {
  const lines = [
    `boundary    ${report.boundary}: ${report.boundaryStatement}`,
    `durability  ${report.durability}`,
    `workload    ${report.workload}; ${report.offered}; achieved ${report.achievedCommandsPerSecond}/s`,
    `latency ms  p50 ${report.latencyMs.p50}  p99 ${report.latencyMs.p99}  p99.9 ${report.latencyMs.p999}  max ${report.latencyMs.max}`,
    `window      dedup ${report.dedupWindowSeconds} s; crossed: ${report.crossedTheWindow}`,
    "",
    "series                                   first       last   per command while filling  growth %  bounded",
    ...report.series.map(
      (v) =>
        `${v.name.padEnd(40)} ${(v.unit === "bytes" ? mb(v.first) : String(v.first)).padStart(9)} ${(v.unit === "bytes" ? mb(v.last) : String(v.last)).padStart(10)}   ${`${num(v.perCommandWhileFilling, v.unit === "bytes" ? 0 : 2)} ${v.unit === "bytes" ? "B" : v.unit}`.padStart(24)}  ${num(v.growthPercent).padStart(8)}  ${v.bounded === undefined ? "-" : v.bounded ? "yes" : "NO"}`,
    ),
    "",
    `projection  memory exhausted in ${report.projection.hoursUntilMemoryIsExhausted} h (of ${mb(report.projection.memoryAvailableAtStartBytes)} available); disk full in ${report.projection.hoursUntilDiskIsFull} h (of ${mb(report.projection.diskFreeAtStartBytes)} free)`,
    `rewrites    ${report.aofRewrites.length}: ${report.aofRewrites.map((r) => `${r.server} at ${Math.round(r.toS)} s (fork ${r.forkMs.toFixed(1)} ms; durability wait p99.9 <= ${r.durabilityWaitP999Ms} ms; ${describeStall(r.worstStall)}${r.duringReplicaRestart ? "; during the replica restart" : ""})`).join("; ") || "none"}`,
    `stalls      Valkey main thread >= ${report.valkeyStalls.thresholdMs} ms (latency monitor), around rewrites / away: ${report.valkeyStalls.rows.map((s) => `${s.server} ${s.event} ${s.aroundRewrites.count} max ${s.aroundRewrites.maxMs} ms / ${s.awayFromRewrites.count} max ${s.awayFromRewrites.maxMs} ms`).join("; ") || "none"}`,
    `durability  ${describeWaits(report.durabilityWaitMs)}; timeouts ${report.durabilityTimeouts}`,
    `replica     ${typeof report.replicaRestart === "string" ? report.replicaRestart : `SIGKILLed at ${Math.round(report.replicaRestart.killedAtS)} s, restarted at ${Math.round(report.replicaRestart.restartedAtS ?? -1)} s, online again at ${Math.round(report.replicaRestart.onlineAgainAtS ?? -1)} s, ${report.replicaRestart.fullResyncs} full resync(s)${report.replicaRestart.error ? `; failed: ${report.replicaRestart.error}` : ""}`}`,
    `backlogs    stream length max ${report.maxStreamLength}; command queue depth max ${report.maxCommandQueueDepth}`,
    `books       resting orders ${report.restingOrders.first} at the start, ${report.restingOrders.last} at the end; judged span: ${report.restingOrders.judgedSpan}`,
    "",
    "minute  commands/s  p50 ms (median of seconds)  p99 ms (worst second)",
    ...report.perMinute.map(
      (m) =>
        `${String(m.minute).padStart(6)}  ${String(m.commandsPerSecond).padStart(10)}  ${num(m.p50Ms).padStart(26)}  ${num(m.maxSecondP99Ms).padStart(21)}`,
    ),
    "",
    `pipeline    ${Object.entries(report.pipelineInvariants)
      .map(([k, v]) => `${k}=${v}`)
      .join("  ")}`,
    `invariants  ${Object.entries(report.invariants)
      .map(([k, v]) => `${k}=${v}`)
      .join("  ")}`,
    `environment ${Object.entries(report.environment)
      .map(([k, v]) => `${k}=${v}`)
      .join("; ")}`,
  ];
  return lines.join("\n");
}
