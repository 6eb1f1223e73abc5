/**
 * The capacity search's page section: every step as a table row (offered and achieved rate,
 * latency, backlogs, whether it was sustained and why not, its p99 against the bound) and the latency-throughput chart, with
 * the p99 bound drawn across it.
 */
import { lineChart } from "./html-charts";
import { esc, formatCount, formatMs } from "./html-format";
import type { BenchReport } from "./report";

interface Step {
  offered: number;
  achieved: number;
  p50: number;
  p99: number;
  p999: number;
  maxQueueDepth: number;
  maxStreamLength: number;
  held: boolean;
  reasons: string[];
  withinBound?: boolean;
}

function parseSteps(text: unknown): Step[] {
  if (typeof text !== "string") return [];
  try {
    const parsed = JSON.parse(text) as unknown;
    return Array.isArray(parsed) ? (parsed as Step[]) : [];
  } catch {
    return [];
  }
}

/** Whether the report is a capacity search's (its steps replace the charts over time). */
export function isCapacityReport(report: BenchReport): boolean {
  return parseSteps(report.extra.steps).length > 0;
}

export function capacitySection(report: BenchReport): string {
  const steps = parseSteps(report.extra.steps);
  if (steps.length === 0) return "";
  const bound = Number(report.extra.p99BoundMs);
  const rows = steps
    .map(
      (s) =>
        `<tr class="${s.held ? "pass" : "fail"}"><td class="num">${formatCount(s.offered)}</td><td class="num">${formatCount(s.achieved)}</td><td class="num">${formatMs(s.p50)}</td><td class="num">${formatMs(s.p99)}</td><td class="num">${formatMs(s.p999)}</td><td class="num">${formatCount(s.maxQueueDepth)}</td><td class="num">${formatCount(s.maxStreamLength)}</td><td>${esc(verdict(s, bound))}</td></tr>`,
    )
    .join("");
  const sorted = [...steps].sort((a, b) => a.offered - b.offered);
  const at = (read: (s: Step) => number) =>
    sorted.map((s): [number, number] => [s.achieved, read(s)]);
  const xs = sorted.map((s) => s.achieved);
  const chart = lineChart({
    id: "chart-capacity",
    label: "Latency against achieved throughput, one point per step",
    xLabel: "achieved commands/s",
    yLabel: "ms (log)",
    yLog: true,
    area: false,
    lines: [
      { name: "p50", color: "#2563eb", points: at((s) => s.p50) },
      { name: "p99", color: "#ea580c", points: at((s) => s.p99) },
      { name: "p99.9", color: "#b91c1c", points: at((s) => s.p999) },
      ...(bound > 0
        ? [
            {
              name: `p99 bound ${bound} ms`,
              color: "#6b7280",
              points: [
                [0, bound],
                [Math.max(...xs), bound],
              ] as [number, number][],
            },
          ]
        : []),
    ],
  });
  return `<section><h2>The capacity search, step by step</h2>
<table class="steps"><thead><tr><th>offered/s</th><th>achieved/s</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>queue &lt;=</th><th>stream &lt;=</th><th>verdict</th></tr></thead><tbody>${rows}</tbody></table>
${chart}</section>`;
}

function verdict(step: Step, bound: number): string {
  if (!step.held) return step.reasons.join("; ");
  if (step.withinBound === undefined) return "sustained";
  return step.withinBound ? "sustained" : `sustained, p99 above ${bound} ms`;
}
