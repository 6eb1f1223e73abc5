// The benchmark report shape shared by every boundary (domain, conductor, pipeline), with a
// readable table rendering; environment facts are passed in (see environment.ts).

import type { Percentiles } from "./histogram";

export interface BenchReport {
  boundary: string;
  boundaryStatement: string;
  durability: string;
  workload: string;
  workloadDescription?: string;
  /**
   * What `commands` counts, "commands" when absent: the outbox and broker event flows count
   * events, the datastore transactions (the JSON keeps the field names the issues fix).
   */
  unit?: "commands" | "events" | "transactions";
  commands: number;
  warmup: number;
  seconds: number;
  commandsPerSecond: number;
  latencyMs: Percentiles;
  invariants: { ok: boolean; [check: string]: boolean | number | string };
  /**
   * The names in `invariants` that are checks even though their value is a figure (a count
   * that must be 0); booleans are checks anyway, and the rest is evidence beside them.
   */
  checks?: string[];
  /** Flat label/value facts: the machine always, server versions and settings when a stack was used. */
  environment: Record<string, string | number>;
  extra: Record<string, number | string | boolean>;
}

const fmt = (value: number, digits = 0) =>
  value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** A two-column table of the report, for humans reading a terminal. */
export function renderReport(report: BenchReport): string {
  const unit = report.unit ?? "commands";
  const rows: [string, string][] = [
    ["boundary", `${report.boundary}: ${report.boundaryStatement}`],
    ["durability", report.durability],
    [
      "workload",
      report.workloadDescription
        ? `${report.workload} (${report.workloadDescription})`
        : report.workload,
    ],
    [unit, `${fmt(report.commands)} (+${fmt(report.warmup)} warm-up, not counted)`],
    ["seconds", fmt(report.seconds, 3)],
    [`${unit}/s`, fmt(report.commandsPerSecond)],
    [
      "latency ms",
      `p50 ${report.latencyMs.p50}  p95 ${report.latencyMs.p95}  p99 ${report.latencyMs.p99}  ` +
        `p99.9 ${report.latencyMs.p999}  max ${report.latencyMs.max}`,
    ],
    [
      "invariants",
      Object.entries(report.invariants)
        .map(([k, v]) => `${k}=${v}`)
        .join("  "),
    ],
    ...Object.entries(report.extra).map(([k, v]): [string, string] => [
      k,
      typeof v === "number" ? fmt(v, 2) : String(v),
    ]),
    [
      "environment",
      Object.entries(report.environment)
        .map(([k, v]) => `${k}=${v}`)
        .join("; "),
    ],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join("\n");
}
