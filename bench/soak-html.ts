/**
 * The soak's HTML report: its verdicts as tables, and each sampled series over time (Valkey
 * memory, keys and AOF, every process's RSS and heap, backlogs, latency per minute), with the
 * window's end and the judged span named beside each chart.
 */
import { type Line, lineChart } from "./html-charts";
import { esc, table } from "./html-format";
import { css } from "./html-report";
import { flatGrowthPercent, growthStandardErrors, type SeriesVerdict } from "./soak-analysis";
import { describeStall, describeWaits, type SoakReport } from "./soak-report";

const colors = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563"];

type Sample = SoakReport["samples"][number];

function linesOf(
  samples: readonly Sample[],
  series: [name: string, read: (s: Sample) => number][],
): Line[] {
  return series.map(([name, read], i) => ({
    name,
    color: colors[i % colors.length]!,
    points: samples.map((s): [number, number] => [s.t, read(s)]),
  }));
}

const mb = (bytes: number) => bytes / 1e6;

function chart(id: string, label: string, yLabel: string, lines: Line[]): string {
  return `<section><h2>${esc(label)}</h2>${lineChart({ id, label, xLabel: "seconds since the load began", yLabel, yLog: false, lines, area: false })}</section>`;
}

/** The fitted growth with twice its standard error: the noise the verdict allows for. */
function growthCell(v: SeriesVerdict): string {
  if (v.growthPercent === undefined) return "-";
  const noise = (v.growthStdErrPercent ?? 0) * growthStandardErrors;
  return `${v.growthPercent.toFixed(1)} ± ${noise.toFixed(1)}`;
}

function verdictOf(v: SeriesVerdict): string {
  if (v.bounded === undefined) return "not judged";
  if (!v.bounded) return "GROWING";
  const withinNoise = (v.growthPercent ?? 0) >= flatGrowthPercent;
  return withinNoise ? "flat (growth within its noise)" : "flat";
}

/** The report's tables' rows: each series' verdict, Valkey's stalls, the AOF rewrites. */
function soakRows(report: SoakReport) {
  const verdictRows = report.series
    .map((v) => {
      const cls = v.bounded === undefined ? "info" : v.bounded ? "pass" : "fail";
      const perCommand =
        v.perCommandWhileFilling === undefined
          ? "-"
          : `${v.perCommandWhileFilling.toFixed(v.unit === "bytes" ? 0 : 2)} ${v.unit === "bytes" ? "B" : v.unit}`;
      return `<tr class="${cls}"><td>${esc(v.name)}</td><td class="num">${esc(perCommand)}</td><td class="num">${growthCell(v)}</td><td>${verdictOf(v)}</td></tr>`;
    })
    .join("");
  const stallRows = report.valkeyStalls.rows
    .map(
      (s) =>
        `<tr><td>${esc(s.server)}</td><td>${esc(s.event)}</td><td class="num">${s.aroundRewrites.count}</td><td class="num">${s.aroundRewrites.maxMs} ms</td><td class="num">${s.awayFromRewrites.count}</td><td class="num">${s.awayFromRewrites.maxMs} ms</td></tr>`,
    )
    .join("");
  const rewriteRows = report.aofRewrites
    .map(
      (r) =>
        `<tr><td>${esc(r.server)}${r.duringReplicaRestart ? " (during the replica restart)" : ""}</td><td class="num">${Math.round(r.fromS)}–${Math.round(r.toS)} s</td><td class="num">${r.forkMs.toFixed(1)} ms</td><td class="num">&lt;= ${r.durabilityWaitP999Ms} ms</td><td class="num">${r.waits}</td><td>${esc(describeStall(r.worstStall))}</td></tr>`,
    )
    .join("");
  return { verdictRows, stallRows, rewriteRows };
}

/** The run's facts, one row each. */
function soakFacts(report: SoakReport): [string, string][] {
  return [
    ["offered", report.offered],
    ["achieved", `${report.achievedCommandsPerSecond} commands/s`],
    ["dedup window", `${report.dedupWindowSeconds} s`],
    ["crossed the window", report.crossedTheWindow],
    ["memory exhausted in", `${report.projection.hoursUntilMemoryIsExhausted} h`],
    ["disk full in", `${report.projection.hoursUntilDiskIsFull} h`],
    ["durability wait p99.9", describeWaits(report.durabilityWaitMs)],
    ["durability timeouts", String(report.durabilityTimeouts)],
    [
      "resting orders",
      `${report.restingOrders.first} at the start, ${report.restingOrders.last} at the end; judged span: ${report.restingOrders.judgedSpan}`,
    ],
    [
      "replica restart",
      typeof report.replicaRestart === "string"
        ? report.replicaRestart
        : `SIGKILLed at ${Math.round(report.replicaRestart.killedAtS)} s, online again at ${Math.round(report.replicaRestart.onlineAgainAtS ?? -1)} s, ${report.replicaRestart.fullResyncs} full resync(s)`,
    ],
    [
      "invariants",
      Object.entries(report.invariants)
        .map(([k, v]) => `${k}=${v}`)
        .join("  "),
    ],
  ];
}

/** The charts: memory, keys, AOF, RSS, heaps, backlogs, then latency per minute. */
function soakCharts(report: SoakReport): string[] {
  const samples = report.samples;
  const servers = Object.keys(samples[0]?.servers ?? {});
  const processes = Object.keys(samples[0]?.rssBytes ?? {});
  const heaps = Object.keys(samples[0]?.heapBytes ?? {});
  return [
    chart(
      "chart-memory",
      "Valkey used_memory",
      "MB",
      linesOf(
        samples,
        servers.map((s) => [s, (x) => mb(x.servers[s]!.usedMemory)]),
      ),
    ),
    chart(
      "chart-keys",
      "Valkey keys",
      "keys",
      linesOf(
        samples,
        servers.map((s) => [s, (x) => x.servers[s]!.keys]),
      ),
    ),
    chart(
      "chart-aof",
      "AOF size, and after its last rewrite",
      "MB",
      linesOf(
        samples,
        servers.flatMap((s): [string, (x: Sample) => number][] => [
          [`${s} AOF`, (x) => mb(x.servers[s]!.aofBytes)],
          [`${s} after rewrite`, (x) => mb(x.servers[s]!.aofBaseBytes)],
        ]),
      ),
    ),
    chart(
      "chart-rss",
      "RSS per process",
      "MB",
      linesOf(
        samples,
        processes.map((p) => [p, (x) => mb(x.rssBytes[p] ?? 0)]),
      ),
    ),
    chart(
      "chart-heap",
      "Heap used per service",
      "MB",
      linesOf(
        samples,
        heaps.map((h) => [h, (x) => mb(x.heapBytes[h] ?? 0)]),
      ),
    ),
    chart(
      "chart-backlog",
      "Backlogs",
      "messages",
      linesOf(samples, [
        ["event stream length", (x) => x.streamLength],
        ["command queue depth", (x) => x.queueDepth],
      ]),
    ),
    `<section><h2>Latency per minute (end to end)</h2>${lineChart({
      id: "chart-minutes",
      label: "Latency per minute",
      xLabel: "minute",
      yLabel: "ms",
      yLog: false,
      area: false,
      lines: [
        {
          name: "p50 (median second)",
          color: colors[0]!,
          points: report.perMinute.map((m) => [m.minute, m.p50Ms]),
        },
        {
          name: "p99 (worst second)",
          color: colors[1]!,
          points: report.perMinute.map((m) => [m.minute, m.maxSecondP99Ms]),
        },
      ],
    })}</section>`,
  ];
}

export function renderSoakHtml(report: SoakReport): string {
  const ok = report.invariants.ok;
  const { verdictRows, stallRows, rewriteRows } = soakRows(report);
  const facts = soakFacts(report);
  const charts = soakCharts(report);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>matchd bench: soak</title><style>${css}</style></head>
<body><main>
<header><h1>matchd bench: soak</h1>
<p class="headline"><span class="badge ${ok ? "pass" : "fail"}">${ok ? "bounded, invariants hold" : "GROWING or an invariant BROKEN"}</span></p>
<p>${esc(report.boundaryStatement)}; durability <b>${esc(report.durability)}</b>; workload ${esc(report.workload)}.</p>
</header>
<section><h2>Run</h2>${table(facts)}</section>
<section><h2>Series</h2><table><thead><tr><th>series</th><th>per command while the window fills</th><th>growth % over the judged span (± 2 standard errors)</th><th>verdict</th></tr></thead><tbody>${verdictRows}</tbody></table></section>
<section><h2>AOF rewrites</h2><table><thead><tr><th>server</th><th>between samples</th><th>fork</th><th>durability wait p99.9 around it</th><th>waits</th><th>longest Valkey stall around it</th></tr></thead><tbody>${rewriteRows}</tbody></table></section>
<section><h2>Valkey main-thread stalls (latency monitor, at least ${report.valkeyStalls.thresholdMs} ms)</h2><table><thead><tr><th>server</th><th>event</th><th>around rewrites</th><th>longest</th><th>away from rewrites</th><th>longest</th></tr></thead><tbody>${stallRows}</tbody></table></section>
${charts.join("\n")}
<footer>Generated by matchd bench at ${esc(new Date().toISOString())}.</footer>
</main></body></html>
`;
}
