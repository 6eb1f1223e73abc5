/**
 * CPU seconds each process spent in a report's timed run (its `cpuSeconds`), as a table:
 * how many cores each kept busy, and its CPU time per command.
 */
import { esc, formatMs, table } from "./html-format";
import type { BenchReport } from "./report";

function parseSeconds(text: unknown): [string, number][] {
  if (typeof text !== "string") return [];
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    return Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === "number");
  } catch {
    return [];
  }
}

/** The CPU table; empty when the report measured none. */
export function cpuSection(report: BenchReport): string {
  const used = parseSeconds(report.extra.cpuSeconds);
  if (used.length === 0 || !(report.seconds > 0) || !(report.commands > 0)) return "";
  const total = used.reduce((sum, [, seconds]) => sum + seconds, 0);
  const row = (name: string, seconds: number) =>
    `<tr><td>${esc(name)}</td><td class="num">${seconds.toFixed(2)}</td><td class="num">${(seconds / report.seconds).toFixed(2)}</td><td class="num">${esc(formatMs((seconds * 1e6) / report.commands))}</td></tr>`;
  const missing = report.extra.cpuNotMeasured;
  return `<section><h2>CPU per process</h2>
<p class="note">User and system CPU seconds over the timed run (${esc(report.seconds.toFixed(1))} s), read from /proc; a Valkey's include its rewrite children.</p>
<table class="cpu"><thead><tr><th>process</th><th>CPU seconds</th><th>cores busy</th><th>CPU µs per command</th></tr></thead>
<tbody>${used.map(([name, seconds]) => row(name, seconds)).join("")}${row("all of them", total)}</tbody></table>
${typeof missing === "string" ? table([["not measured", missing]]) : ""}</section>`;
}
