// Renders one bench report as a single self-contained HTML page: inline CSS and SVG charts
// drawn here in TypeScript, no scripts and nothing fetched, so the file can be mailed,
// archived next to the JSON and opened offline years later.

import { type Environment, environmentFacts } from "./environment";
import type { BenchReport } from "./report";
import type { HistogramBucket, ReportSeries } from "./series-recorder";

export interface HtmlReportOptions {
  /** The detailed environment (server versions and settings); the report's own is shown when absent. */
  environment?: Environment;
  title?: string;
}

export function renderHtmlReport(
  report: BenchReport,
  series: ReportSeries,
  options: HtmlReportOptions = {},
): string {
  const title = options.title ?? `matchd bench: ${report.boundary}`;
  const environmentRows: [string, string][] =
    options.environment === undefined
      ? reportEnvironmentRows(report.environment)
      : environmentFacts(options.environment);
  const workload = report.workloadDescription
    ? `${report.workload}: ${report.workloadDescription}`
    : report.workload;
  const l = report.latencyMs;
  const ok = report.invariants.ok;

  const summaryRows: [string, string][] = [
    ["commands/s", formatCount(report.commandsPerSecond)],
    [
      "commands",
      `${formatCount(report.commands)} (+${formatCount(report.warmup)} warm-up, not counted)`,
    ],
    ["seconds", report.seconds.toFixed(3)],
    ["latency p50", `${formatMs(l.p50)} ms`],
    ["latency p95", `${formatMs(l.p95)} ms`],
    ["latency p99", `${formatMs(l.p99)} ms`],
    ["latency p99.9", `${formatMs(l.p999)} ms`],
    ["latency max", `${formatMs(l.max)} ms`],
  ];
  const extraRows = Object.entries(report.extra).map(([k, v]): [string, string] => [
    k,
    typeof v === "number" ? formatNumber(v) : typeof v === "string" ? readableJson(v) : String(v),
  ]);

  // A failed check keeps its evidence under its name and adds `<name>Failed: true`.
  const failedChecks = new Set(
    Object.entries(report.invariants)
      .filter(([name, value]) => name.endsWith("Failed") && value === true)
      .map(([name]) => name.slice(0, -"Failed".length)),
  );
  const invariantRows = Object.entries(report.invariants)
    .filter(([name]) => name !== "ok")
    .map(([name, value]) => {
      // Booleans are checks with a verdict, as is evidence whose check failed; other numbers
      // and strings are the evidence beside them.
      const failedFlag = name.endsWith("Failed") && value === true;
      const verdict =
        failedFlag || failedChecks.has(name)
          ? "fail"
          : typeof value === "boolean"
            ? value
              ? "pass"
              : "fail"
            : "info";
      const shown = typeof value === "number" ? formatNumber(value) : String(value);
      return `<tr class="${verdict}"><td>${esc(name)}</td><td class="num">${esc(shown)}</td><td>${verdict}</td></tr>`;
    })
    .join("");

  const t = series.timeline;
  const throughputChart = lineChart({
    id: "chart-throughput",
    label: "Throughput over time",
    xLabel: "seconds",
    yLabel: "commands/s",
    yLog: false,
    lines: [
      {
        name: "commands/s",
        color: "#2563eb",
        points: t.map((p) => [p.tSeconds, p.commandsPerSecond]),
      },
    ],
    area: true,
  });
  const latencyChart = lineChart({
    id: "chart-latency",
    label: "Latency percentiles over time",
    xLabel: "seconds",
    yLabel: "ms (log)",
    yLog: true,
    // Drawn in this order so max lies on top: with few commands per interval p99 equals max,
    // and the max line would otherwise vanish under p99.
    lines: [
      { name: "p50", color: "#2563eb", points: t.map((p) => [p.tSeconds, p.p50Ms]) },
      { name: "p99", color: "#ea580c", points: t.map((p) => [p.tSeconds, p.p99Ms]) },
      { name: "max", color: "#b91c1c", points: t.map((p) => [p.tSeconds, p.maxMs]) },
    ],
    area: false,
  });
  const distributionChart = histogramChart(series.histogram, [
    ["p50", l.p50, "#2563eb"],
    ["p99", l.p99, "#ea580c"],
    ["max", l.max, "#b91c1c"],
  ]);

  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${css}</style>
</head>
<body>
<main>
<header>
<h1>${esc(title)}</h1>
<p class="headline"><span id="headline-figure" class="figure">${esc(formatCount(report.commandsPerSecond))}</span> commands/s
<span class="sub">p50 ${esc(formatMs(l.p50))} ms · p99 ${esc(formatMs(l.p99))} ms · max ${esc(formatMs(l.max))} ms</span>
<span class="badge ${ok ? "pass" : "fail"}">invariants ${ok ? "hold" : "BROKEN"}</span></p>
<dl class="facts">
<dt>boundary</dt><dd><b>${esc(report.boundary)}</b>: ${esc(report.boundaryStatement)}</dd>
<dt>durability</dt><dd><b>${esc(report.durability)}</b></dd>
<dt>workload</dt><dd>${esc(workload)}</dd>
</dl>
</header>
<div class="grid">
<section><h2>Throughput and latency</h2>${table(summaryRows)}${extraRows.length > 0 ? table(extraRows) : ""}</section>
<section><h2>Invariants</h2>
<table class="invariants"><thead><tr><th>check</th><th>value</th><th>verdict</th></tr></thead>
<tbody><tr class="${ok ? "pass" : "fail"}"><td><b>all checks</b></td><td class="num">${ok}</td><td>${ok ? "pass" : "fail"}</td></tr>${invariantRows}</tbody></table>
<h2>Environment</h2>${table(environmentRows)}</section>
</div>
<section><h2>Throughput over time</h2>${throughputChart}</section>
<section><h2>Latency percentiles over time</h2>${latencyChart}</section>
<section><h2>Latency distribution</h2>${distributionChart}</section>
<footer>Generated by matchd bench at ${esc(new Date().toISOString())}. Each figure holds only under the boundary, durability policy, workload and environment stated above.</footer>
</main>
</body>
</html>
`;
}

/** The report pages' style sheet, shared with the soak's page (soak-html.ts). */
export const css = `
*{box-sizing:border-box}
body{margin:0;background:#f6f7f9;color:#1f2328;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
main{max-width:1080px;margin:0 auto;padding:20px 24px 32px}
h1{font-size:20px;margin:0 0 6px}
h2{font-size:15px;margin:18px 0 8px}
header{background:#fff;border:1px solid #d8dee4;border-radius:8px;padding:16px 20px}
.headline{margin:4px 0 12px;font-size:15px}
.figure{font-size:34px;font-weight:700;font-variant-numeric:tabular-nums;margin-right:4px}
.sub{color:#57606a;margin-left:14px}
.badge{display:inline-block;margin-left:14px;padding:2px 10px;border-radius:12px;font-size:13px;font-weight:600}
.badge.pass{background:#dafbe1;color:#116329}.badge.fail{background:#ffebe9;color:#a40e26}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:0}
.facts dt{color:#57606a}.facts dd{margin:0}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:0 24px}
section{min-width:0}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d8dee4;margin-bottom:10px}
th,td{text-align:left;padding:4px 10px;border-bottom:1px solid #eaeef2;vertical-align:top;overflow-wrap:anywhere}
th{background:#f0f2f4;font-weight:600}
table.kv th{width:38%}
td.num{font-variant-numeric:tabular-nums}
tr.pass td{background:#eefbf1}tr.pass td:last-child{color:#116329;font-weight:600}
tr.fail td{background:#ffebe9}tr.fail td:last-child{color:#a40e26;font-weight:700}
tr.info td:last-child{color:#57606a}
svg{display:block;width:100%;height:auto;background:#fff;border:1px solid #d8dee4;border-radius:6px}
svg text{font:12px system-ui,sans-serif;fill:#57606a}
svg .grid-line{stroke:#eaeef2}
svg .axis{stroke:#8c959f}
footer{margin-top:18px;color:#57606a;font-size:12px}
@media (max-width:800px){.grid{grid-template-columns:1fr}}
`;

/**
 * The report's own environment, whatever its shape: the structured machine description or
 * the flat label/value facts a caller copied in from environmentFacts().
 */
function reportEnvironmentRows(environment: object): [string, string][] {
  return Object.entries(environment).map(([key, value]): [string, string] => {
    if (key === "totalMemoryBytes" && typeof value === "number") {
      return ["memory", `${(value / 2 ** 30).toFixed(1)} GiB`];
    }
    return [key, typeof value === "number" ? formatNumber(value) : String(value)];
  });
}

export function table(rows: [string, string][]): string {
  const body = rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td class="num">${esc(v)}</td></tr>`);
  return `<table class="kv">${body.join("")}</table>`;
}

// ---- charts -------------------------------------------------------------------------

const width = 1000;
const height = 260;
const margin = { left: 70, right: 20, top: 30, bottom: 40 };
const plotW = width - margin.left - margin.right;
const plotH = height - margin.top - margin.bottom;

export interface Line {
  name: string;
  color: string;
  points: [number, number][];
}

interface Scale {
  at(value: number): number;
  ticks: number[];
}

function linearScale(min: number, max: number, from: number, to: number): Scale {
  const step = niceStep((max - min) / 5);
  const lo = Math.floor(min / step) * step;
  const hi = Math.max(Math.ceil(max / step) * step, lo + step);
  const ticks: number[] = [];
  for (let v = lo; v <= hi + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { at: (v) => from + ((v - lo) / (hi - lo)) * (to - from), ticks };
}

function logScale(min: number, max: number, from: number, to: number): Scale {
  const lo = Math.floor(Math.log10(min));
  const hi = Math.max(Math.ceil(Math.log10(max)), lo + 1);
  // Within two decades, 2 and 5 between the powers of ten keep the axis readable.
  const multiples = hi - lo <= 2 ? [1, 2, 5] : [1];
  const ticks: number[] = [];
  for (let e = lo; e <= hi; e++) {
    for (const m of multiples) {
      const v = m * 10 ** e;
      if (v <= 10 ** hi) ticks.push(Number(v.toPrecision(12)));
    }
  }
  return { at: (v) => from + ((Math.log10(v) - lo) / (hi - lo)) * (to - from), ticks };
}

function niceStep(raw: number): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / power;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * power;
}

function svgOpen(id: string, label: string): string {
  return `<svg id="${id}" role="img" aria-label="${esc(label)}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg"><title>${esc(label)}</title>`;
}

function noData(id: string, label: string): string {
  // A short strip rather than a full-height empty plot: absence should be stated, not drawn big.
  return `<svg id="${id}" role="img" aria-label="${esc(label)}" viewBox="0 0 ${width} 48" xmlns="http://www.w3.org/2000/svg"><title>${esc(label)}</title><text x="${width / 2}" y="29" text-anchor="middle">no data recorded for this chart</text></svg>`;
}

function axes(
  x: Scale,
  y: Scale,
  xLabel: string,
  yLabel: string,
  format: (v: number) => string,
): string {
  const parts: string[] = [];
  const bottom = margin.top + plotH;
  for (const v of y.ticks) {
    const py = y.at(v).toFixed(1);
    parts.push(
      `<line class="grid-line" x1="${margin.left}" x2="${margin.left + plotW}" y1="${py}" y2="${py}"/>`,
    );
    parts.push(
      `<text x="${margin.left - 8}" y="${py}" dy="4" text-anchor="end">${esc(format(v))}</text>`,
    );
  }
  for (const v of x.ticks) {
    const px = x.at(v).toFixed(1);
    parts.push(`<line class="axis" x1="${px}" x2="${px}" y1="${bottom}" y2="${bottom + 5}"/>`);
    parts.push(
      `<text x="${px}" y="${bottom + 18}" text-anchor="middle">${esc(formatNumber(v))}</text>`,
    );
  }
  parts.push(
    `<line class="axis" x1="${margin.left}" x2="${margin.left + plotW}" y1="${bottom}" y2="${bottom}"/>`,
  );
  parts.push(
    `<line class="axis" x1="${margin.left}" x2="${margin.left}" y1="${margin.top}" y2="${bottom}"/>`,
  );
  parts.push(
    `<text x="${margin.left + plotW}" y="${height - 4}" text-anchor="end">${esc(xLabel)}</text>`,
  );
  parts.push(
    `<text x="${margin.left}" y="${margin.top - 12}" text-anchor="start">${esc(yLabel)}</text>`,
  );
  return parts.join("");
}

function legend(entries: [string, string][]): string {
  let x = margin.left + plotW;
  const parts: string[] = [];
  // Laid out right to left so the legend ends flush with the plot's right edge.
  for (const [name, color] of [...entries].reverse()) {
    const w = 26 + name.length * 7.5;
    x -= w;
    parts.push(
      `<rect x="${x.toFixed(1)}" y="${margin.top - 21}" width="14" height="4" rx="1" fill="${color}"/>` +
        `<text x="${(x + 18).toFixed(1)}" y="${margin.top - 14}">${esc(name)}</text>`,
    );
  }
  return parts.join("");
}

export function lineChart(spec: {
  id: string;
  label: string;
  xLabel: string;
  yLabel: string;
  yLog: boolean;
  lines: Line[];
  area: boolean;
}): string {
  // A log axis cannot place zero; an empty interval leaves a gap in the latency lines.
  const usable = (y: number) => Number.isFinite(y) && (spec.yLog ? y > 0 : y >= 0);
  const all = spec.lines.flatMap((line) => line.points.filter(([, y]) => usable(y)));
  if (all.length === 0) return noData(spec.id, spec.label);
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y);
  const x = linearScale(Math.min(0, ...xs), Math.max(...xs), margin.left, margin.left + plotW);
  const bottom = margin.top + plotH;
  const y = spec.yLog
    ? logScale(Math.min(...ys), Math.max(...ys), bottom, margin.top)
    : linearScale(0, Math.max(...ys), bottom, margin.top);
  const parts = [
    svgOpen(spec.id, spec.label),
    axes(x, y, spec.xLabel, spec.yLabel, spec.yLog ? formatMs : formatCount),
  ];
  for (const line of spec.lines) {
    const runs: string[][] = [[]];
    for (const [px, py] of line.points) {
      if (usable(py)) runs[runs.length - 1]!.push(`${x.at(px).toFixed(1)},${y.at(py).toFixed(1)}`);
      else if (runs[runs.length - 1]!.length > 0) runs.push([]);
    }
    for (const run of runs.filter((r) => r.length > 0)) {
      if (spec.area && run.length > 1) {
        const first = run[0]!.split(",")[0];
        const last = run[run.length - 1]!.split(",")[0];
        parts.push(
          `<polygon fill="${line.color}" fill-opacity="0.12" points="${first},${bottom} ${run.join(" ")} ${last},${bottom}"/>`,
        );
      }
      parts.push(
        `<polyline fill="none" stroke="${line.color}" stroke-width="2" stroke-linejoin="round" points="${run.join(" ")}"/>`,
      );
      // Markers only where they stay legible; a single point would otherwise be invisible.
      if (line.points.length <= 40) {
        for (const point of run) {
          const [cx, cy] = point.split(",");
          parts.push(`<circle cx="${cx}" cy="${cy}" r="2.5" fill="${line.color}"/>`);
        }
      }
    }
  }
  parts.push(legend(spec.lines.map((line) => [line.name, line.color])));
  parts.push("</svg>");
  return parts.join("");
}

function histogramChart(buckets: HistogramBucket[], markers: [string, number, string][]): string {
  const id = "chart-histogram";
  const label = "Latency distribution (log-scale ms)";
  const nonEmpty = buckets.filter((b) => b.count > 0 && b.upperMs > 0);
  if (nonEmpty.length === 0) return noData(id, label);
  // Each bucket spans from the previous upper edge; the first borrows its neighbour's ratio.
  const edges = buckets.map((b, i): [number, number, number] => {
    const next = buckets[i + 1]?.upperMs;
    const previous = buckets[i - 1]?.upperMs;
    const lower =
      previous ?? (next === undefined ? b.upperMs / 10 ** 0.1 : (b.upperMs * b.upperMs) / next);
    return [lower, b.upperMs, b.count];
  });
  const positive = edges.filter(([lower, upper]) => lower > 0 && upper > 0);
  const markerValues = markers.map(([, v]) => v).filter((v) => v > 0);
  const xMin = Math.min(...positive.map(([lower]) => lower), ...markerValues);
  const xMax = Math.max(...positive.map(([, upper]) => upper), ...markerValues);
  const x = logScale(xMin, xMax, margin.left, margin.left + plotW);
  const bottom = margin.top + plotH;
  const countMax = Math.max(...nonEmpty.map((b) => b.count));
  // Counts on a log axis so that the rare slow commands in the tail stay visible next to the peak.
  const y = logScale(1, countMax, bottom, margin.top);
  const parts = [
    svgOpen(id, label),
    axes(x, y, "latency, ms (log)", "commands (log)", formatCount),
  ];
  for (const [lower, upper, count] of positive) {
    if (count <= 0) continue;
    const x0 = x.at(lower);
    const x1 = x.at(upper);
    // Count 1 sits on the floor of a log axis; a 3 px minimum height keeps it visible.
    const top = Math.min(y.at(count), bottom - 3);
    parts.push(
      `<rect x="${(x0 + 0.5).toFixed(1)}" y="${top.toFixed(1)}" width="${Math.max(x1 - x0 - 1, 1).toFixed(1)}" height="${(bottom - top).toFixed(1)}" fill="#2563eb" fill-opacity="0.75"><title>${esc(`${formatMs(lower)}–${formatMs(upper)} ms: ${formatCount(count)}`)}</title></rect>`,
    );
  }
  for (const [, value, color] of markers) {
    if (!(value > 0)) continue;
    const px = x.at(value).toFixed(1);
    parts.push(
      `<line x1="${px}" x2="${px}" y1="${margin.top}" y2="${bottom}" stroke="${color}" stroke-width="1.5" stroke-dasharray="4 3"/>`,
    );
  }
  parts.push(
    legend(markers.map(([name, value, color]) => [`${name} ${formatMs(value)} ms`, color])),
  );
  parts.push("</svg>");
  return parts.join("");
}

// ---- formatting ---------------------------------------------------------------------

/** Escapes text for HTML element content and double- or single-quoted attributes. */
function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

export const esc = escapeHtml;

function formatCount(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}

function formatNumber(value: number): string {
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  return value.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

/**
 * Callers put nested figures (a percentile set, a stage breakdown) into `extra` as JSON
 * strings; a flat JSON object reads better as "p50 0.27 · p99 1.97". Anything else is shown as is.
 */
function readableJson(text: string): string {
  if (!text.startsWith("{")) return text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return text;
  const parts: string[] = [];
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value === "object" && value !== null) return text;
    const label = key === "p999" ? "p99.9" : key;
    parts.push(`${label} ${typeof value === "number" ? formatMs(value) : String(value)}`);
  }
  return parts.join(" · ");
}

/** Three significant figures below 100 ms, whole milliseconds above. */
function formatMs(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString("en-US");
  return Number(value.toPrecision(3)).toString();
}
