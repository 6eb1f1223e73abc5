/**
 * SVG charts for the HTML reports, drawn here in TypeScript: line charts over time (with
 * shaded spans such as AOF rewrites), the latency histogram, the percentile (HDR) plot and
 * stacked bars. No scripts, so a page renders the same offline years later.
 */
import { esc, formatCount, formatMs, formatNumber } from "./html-format";
import type { HistogramBucket, Span } from "./series-recorder";

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

function svgOpen(id: string, label: string, h = height): string {
  return `<svg id="${id}" role="img" aria-label="${esc(label)}" viewBox="0 0 ${width} ${h}" xmlns="http://www.w3.org/2000/svg"><title>${esc(label)}</title>`;
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
  xFormat: (v: number) => string = formatNumber,
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
    // A label at the right edge ends there rather than running off the picture.
    const anchor = x.at(v) > width - margin.right - 30 ? "end" : "middle";
    parts.push(
      `<text x="${px}" y="${bottom + 18}" text-anchor="${anchor}">${esc(xFormat(v))}</text>`,
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

const spanColor = "#a855f7";

export function lineChart(spec: {
  id: string;
  label: string;
  xLabel: string;
  yLabel: string;
  yLog: boolean;
  lines: Line[];
  area: boolean;
  spans?: readonly Span[];
}): string {
  // A log axis cannot place zero; an empty interval leaves a gap in the latency lines.
  const usable = (y: number) => Number.isFinite(y) && (spec.yLog ? y > 0 : y >= 0);
  const all = spec.lines.flatMap((line) => line.points.filter(([, y]) => usable(y)));
  if (all.length === 0) return noData(spec.id, spec.label);
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y);
  // The time axis also reaches the end of a span after the last point: a rewrite forced
  // halfway may still run while the last commands drain.
  const spanEnds = (spec.spans ?? [])
    .filter((span) => span.fromSeconds >= 0)
    .map((s) => s.toSeconds);
  const xMax = Math.max(...xs, ...spanEnds);
  const x = linearScale(Math.min(0, ...xs), xMax, margin.left, margin.left + plotW);
  const bottom = margin.top + plotH;
  const y = spec.yLog
    ? logScale(Math.min(...ys), Math.max(...ys), bottom, margin.top)
    : linearScale(0, Math.max(...ys), bottom, margin.top);
  const parts = [
    svgOpen(spec.id, spec.label),
    axes(x, y, spec.xLabel, spec.yLabel, spec.yLog ? formatMs : linearFormat(Math.max(...ys))),
    shadedSpans(spec.spans ?? [], x, xMax),
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
  const spanNames = [...new Set((spec.spans ?? []).map((span) => span.label))];
  parts.push(
    legend([
      ...spec.lines.map((line): [string, string] => [line.name, line.color]),
      ...spanNames.map((name): [string, string] => [name, spanColor]),
    ]),
  );
  parts.push("</svg>");
  return parts.join("");
}

/** Whole numbers on an axis that reaches 10 or more; small values keep their decimals. */
function linearFormat(max: number): (v: number) => string {
  return max >= 10 ? formatCount : formatNumber;
}

/** Each span as a translucent band over the plot's full height, clipped to the data's time. */
function shadedSpans(spans: readonly Span[], x: Scale, xMax: number): string {
  return spans
    .filter((span) => span.toSeconds >= 0 && span.fromSeconds <= xMax)
    .map((span) => {
      const x0 = x.at(Math.max(0, span.fromSeconds));
      // A rewrite shorter than a pixel still shows as a 2 px band.
      const x1 = Math.max(x.at(Math.min(xMax, span.toSeconds)), x0 + 2);
      return `<rect x="${x0.toFixed(1)}" y="${margin.top}" width="${(x1 - x0).toFixed(1)}" height="${plotH}" fill="${spanColor}" fill-opacity="0.15"><title>${esc(`${span.label}${span.detail === undefined ? "" : ` (${span.detail})`}: ${formatNumber(span.fromSeconds)}–${formatNumber(span.toSeconds)} s`)}</title></rect>`;
    })
    .join("");
}

export function histogramChart(
  buckets: HistogramBucket[],
  markers: [string, number, string][],
): string {
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
  // Only buckets that hold commands set the axis: empty ones around them would stretch it.
  const positive = edges.filter(([lower, upper, count]) => lower > 0 && upper > 0 && count > 0);
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

/** "99.9%" for the point 1/(1-p) of the percentile axis. */
function percentileLabel(v: number): string {
  return `${Number((100 * (1 - 1 / v)).toPrecision(6))}%`;
}

/**
 * Latency against percentile, the percentile axis stretched toward the tail (1/(1-p) on a log
 * scale, as HdrHistogram plots it): 90 %, 99 % and 99.9 % are equally far apart.
 */
export function percentileChart(buckets: HistogramBucket[], color = "#2563eb"): string {
  const id = "chart-percentiles";
  const label = "Latency by percentile (HDR plot)";
  const total = buckets.reduce((sum, b) => sum + b.count, 0);
  const filled = buckets.filter((b) => b.count > 0 && b.upperMs > 0);
  if (total === 0 || filled.length === 0) return noData(id, label);
  // The slowest command sits at 1 - 1/N: the farthest the axis can honestly reach.
  const points: [number, number][] = [[1, filled[0]!.upperMs]];
  let below = 0;
  for (const bucket of buckets) {
    below += bucket.count;
    if (bucket.count === 0 || bucket.upperMs <= 0) continue;
    points.push([below >= total ? total : 1 / (1 - below / total), bucket.upperMs]);
  }
  const xMax = Math.max(10, total);
  const x = logScale(1, xMax, margin.left, margin.left + plotW);
  const bottom = margin.top + plotH;
  const ys = points.map(([, v]) => v);
  const y = logScale(Math.min(...ys), Math.max(...ys), bottom, margin.top);
  x.ticks = x.ticks.filter((v) => Number.isInteger(Math.log10(v)));
  const line = points.map(([px, py]) => `${x.at(px).toFixed(1)},${y.at(py).toFixed(1)}`).join(" ");
  return [
    svgOpen(id, label),
    axes(x, y, "percentile (log of 1/(1-p))", "latency, ms (log)", formatMs, percentileLabel),
    `<polyline fill="none" stroke="${color}" stroke-width="2" stroke-linejoin="round" points="${line}"/>`,
    legend([["latency at or below", color]]),
    "</svg>",
  ].join("");
}

export interface StackedBar {
  name: string;
  segments: { name: string; value: number }[];
}

const palette = [
  "#2563eb",
  "#0891b2",
  "#16a34a",
  "#ca8a04",
  "#ea580c",
  "#dc2626",
  "#9333ea",
  "#4b5563",
];

/** Horizontal bars split into segments (a stage breakdown), one colour per segment name. */
export function stackedBarChart(spec: {
  id: string;
  label: string;
  unit: string;
  bars: StackedBar[];
}): string {
  const names = [...new Set(spec.bars.flatMap((bar) => bar.segments.map((s) => s.name)))];
  const totals = spec.bars.map((bar) =>
    bar.segments.reduce((sum, s) => sum + Math.max(0, s.value), 0),
  );
  if (names.length === 0 || !(Math.max(...totals) > 0)) return noData(spec.id, spec.label);
  const color = (name: string) => palette[names.indexOf(name) % palette.length]!;
  const left = 110;
  const legendRows = Math.ceil(names.length / 4);
  const top = 16 + legendRows * 20;
  const barH = 30;
  const h = top + spec.bars.length * (barH + 14) + 40;
  // Room to the right of the longest bar for its total.
  const x = linearScale(0, Math.max(...totals) * 1.12, left, margin.left + plotW);
  const parts = [svgOpen(spec.id, spec.label, h)];
  // Legend first, four to a row: stage names are too long to share one line.
  names.forEach((name, i) => {
    const lx = left + (i % 4) * 215;
    const ly = 14 + Math.floor(i / 4) * 20;
    parts.push(
      `<rect x="${lx}" y="${ly - 9}" width="12" height="12" rx="2" fill="${color(name)}"/><text x="${lx + 17}" y="${ly + 1}">${esc(name)}</text>`,
    );
  });
  const axisY = h - 40;
  for (const v of x.ticks) {
    const px = x.at(v).toFixed(1);
    parts.push(`<line class="grid-line" x1="${px}" x2="${px}" y1="${top}" y2="${axisY}"/>`);
    parts.push(`<text x="${px}" y="${axisY + 18}" text-anchor="middle">${esc(formatMs(v))}</text>`);
  }
  parts.push(
    `<text x="${margin.left + plotW}" y="${h - 4}" text-anchor="end">${esc(spec.unit)}</text>`,
  );
  spec.bars.forEach((bar, i) => {
    const by = top + 7 + i * (barH + 14);
    parts.push(
      `<text x="${left - 8}" y="${by + barH / 2 + 4}" text-anchor="end">${esc(bar.name)}</text>`,
    );
    let at = 0;
    for (const segment of bar.segments) {
      if (!(segment.value > 0)) continue;
      const x0 = x.at(at);
      const x1 = x.at(at + segment.value);
      at += segment.value;
      parts.push(
        `<rect x="${x0.toFixed(1)}" y="${by}" width="${Math.max(x1 - x0, 0.5).toFixed(1)}" height="${barH}" fill="${color(segment.name)}"><title>${esc(`${bar.name}, ${segment.name}: ${formatMs(segment.value)} ${spec.unit}`)}</title></rect>`,
      );
    }
    parts.push(
      `<text x="${(x.at(at) + 6).toFixed(1)}" y="${by + barH / 2 + 4}">${esc(formatMs(at))}</text>`,
    );
  });
  parts.push("</svg>");
  return parts.join("");
}
