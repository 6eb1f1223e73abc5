/**
 * The cells bench's report: each cell's figures, the affinity read back from the OS, and per
 * cell count the total throughput and its ratio to one cell in the same invocation.
 */

import type { CellsFlags } from "./boundaries/cells";
import type { ProcessFacts } from "./cell-processes";
import { environmentFacts, machineEnvironment } from "./environment";

export interface CellRun {
  cells: number;
  /** The first cell of the group that ran together (cells alone run once per cell). */
  group: number;
  round: number;
  cell: number;
  partition: number;
  cpu: string;
  commandsPerSecond: number;
  p50: number;
  p99: number;
  p999: number;
  invariantsOk: boolean;
  invariants: Record<string, unknown>;
  /** The full-pipeline child with its conductor and outbox. */
  pipelineCpuSeconds: number;
  /** The cell's Valkey primary and replica and RabbitMQ node, over the run. */
  serversCpuSeconds: number;
  /** CPU seconds per component (valkey-primary, valkey-replica, rabbitmq, epmd, conductor, outbox, bench), sampled. */
  cpuByComponent: Record<string, number>;
  wallSeconds: number;
  /** The busiest interrupt sources over the run, per CPU: the disk's land on one CPU. */
  interrupts: { source: string; perCpu: number[] }[];
  processes: (ProcessFacts & { shared: boolean })[];
}

export interface CellsSummary {
  cells: number;
  /**
   * Medians over the rounds of the sum of the cells' rates; with several groups of this size
   * (a cell alone on each CPU), the better group's.
   */
  totalPerSecond: number;
  perCellPerSecond: number[];
  p99PerPartitionMs: number[];
  /** Against the one-cell run of the same invocation (the smallest count when 1 is absent). */
  ratio: number;
  /** CPU time of every process of the cells (servers included) per command. */
  cpuMsPerCommand: number;
  /** The same per component, the median over the cells. */
  cpuMsPerCommandByComponent: Record<string, number>;
}

const round2 = (value: number) => Math.round(value * 100) / 100;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function cellsReport(runs: readonly CellRun[], flags: CellsFlags) {
  const counts = [...new Set(runs.map((r) => r.cells))].sort((a, b) => a - b);
  const summary: CellsSummary[] = counts.map((cells) => {
    const of = runs.filter((r) => r.cells === cells);
    const rounds = [...new Set(of.map((r) => r.round))];
    const totals = rounds.map((round) => {
      const groups = [...new Set(of.filter((r) => r.round === round).map((r) => r.group))];
      return Math.max(
        ...groups.map((group) =>
          of
            .filter((r) => r.round === round && r.group === group)
            .reduce((sum, r) => sum + r.commandsPerSecond, 0),
        ),
      );
    });
    const cellIds = [...new Set(of.map((r) => r.cell))].sort((a, b) => a - b);
    const perCell = (pick: (r: CellRun) => number) =>
      cellIds.map((cell) => median(of.filter((r) => r.cell === cell).map(pick)));
    const cpu = of.reduce((sum, r) => sum + r.pipelineCpuSeconds + r.serversCpuSeconds, 0);
    // Per cell, so a cell alone on each CPU shows both.
    const components = [...new Set(of.flatMap((r) => Object.keys(r.cpuByComponent)))].sort();
    const byComponent = Object.fromEntries(
      components.map((name) => [
        name,
        Math.round(
          (median(of.map((r) => r.cpuByComponent[name] ?? 0)) / flags["--commands"]) * 1e6,
        ) / 1e3,
      ]),
    );
    return {
      cells,
      totalPerSecond: Math.round(median(totals)),
      perCellPerSecond: perCell((r) => r.commandsPerSecond).map(Math.round),
      p99PerPartitionMs: perCell((r) => r.p99).map((v) => Math.round(v * 10) / 10),
      ratio: 0,
      cpuMsPerCommand: Math.round((cpu / (of.length * flags["--commands"])) * 1e6) / 1e3,
      cpuMsPerCommandByComponent: byComponent,
    };
  });
  const base = summary[0]!;
  for (const row of summary) row.ratio = round2(row.totalPerSecond / base.totalPerSecond);
  const failed = runs.filter((r) => !r.invariantsOk).length;
  const shared = runs.flatMap((r) => r.processes.filter((p) => p.shared));
  return {
    boundary: "cells",
    boundaryStatement:
      "each cell a full production path of its own: its own Valkey primary + replica and RabbitMQ node (own data dirs and ports), its own conductor and outbox, bench full-pipeline as its load generator and sink, its own partition of the trace; every process of cell k pinned to CPU k with taskset",
    durability: "aof-replicated (each cell's replica fsyncs)",
    workload: `${flags["--workload"]}, partition k of N per cell (pairId mod N = k), ${flags["--commands"]} commands per cell, closed loop, ${flags["--rounds"]} round(s)`,
    stillShared:
      "the disk (every cell's AOF fsyncs go to one device, whose interrupts one CPU takes: see below), the kernel, memory bandwidth and the last-level cache",
    summary,
    runs,
    invariants: {
      ok: failed === 0 && shared.length === 0,
      cellRunsWithAFailedInvariant: failed,
      processesOnAnotherCellsCpu: shared.length,
    },
    environment: Object.fromEntries(environmentFacts(machineEnvironment())),
  };
}

export type CellsReport = ReturnType<typeof cellsReport>;

export function renderCells(report: CellsReport): string {
  const lines = [
    `boundary    ${report.boundary}: ${report.boundaryStatement}`,
    `durability  ${report.durability}`,
    `workload    ${report.workload}`,
    `shared      ${report.stillShared}`,
    "",
    "cells  total /s  (x 1 cell)  per cell /s      p99 ms per partition  CPU ms/command",
    ...report.summary.map(
      (s) =>
        `${String(s.cells).padStart(5)}  ${String(s.totalPerSecond).padStart(8)}  ${String(s.ratio).padStart(10)}  ${s.perCellPerSecond.join(", ").padEnd(15)}  ${s.p99PerPartitionMs.join(", ").padEnd(20)}  ${s.cpuMsPerCommand}`,
    ),
    "",
    "CPU ms per command by component (median over the cells, sampled every 0.5 s):",
    ...report.summary.map(
      (s) =>
        `  cells=${s.cells}: ${Object.entries(s.cpuMsPerCommandByComponent)
          .map(([name, ms]) => `${name} ${ms}`)
          .join(", ")}`,
    ),
    "",
    "runs: cells round cell cpu partition commands/s p50 p99 p99.9 cpu-s(pipeline+servers) invariants",
    ...report.runs.map(
      (r) =>
        `  ${r.cells} ${r.round} ${r.cell} ${r.cpu} ${r.partition} ${r.commandsPerSecond} ${r.p50.toFixed(1)} ${r.p99.toFixed(1)} ${r.p999.toFixed(1)} ${r.pipelineCpuSeconds.toFixed(1)}+${r.serversCpuSeconds.toFixed(1)} ${r.invariantsOk ? "ok" : "FAILED"}`,
    ),
    "",
    "busiest interrupt sources over each run (count per CPU):",
    ...lastRuns(report.runs)
      .filter((r, i, all) => all.findIndex((o) => o.cells === r.cells && o.group === r.group) === i)
      .map(
        (r) =>
          `  cells=${r.cells} from cell ${r.group}: ${r.interrupts.map((n) => `${n.source} ${n.perCpu.join("/")}`).join("; ")}`,
      ),
    "",
    "affinity read back (Cpus_allowed_list), last run of each cell:",
    ...lastRuns(report.runs).map(
      (r) =>
        `  cells=${r.cells} cell ${r.cell}: ${r.processes.map((p) => `${p.name}=${p.cpusAllowed}`).join(" ")}`,
    ),
    "",
    `invariants  ok=${report.invariants.ok}  cellRunsWithAFailedInvariant=${report.invariants.cellRunsWithAFailedInvariant}  processesOnAnotherCellsCpu=${report.invariants.processesOnAnotherCellsCpu}`,
    `environment ${Object.entries(report.environment)
      .map(([k, v]) => `${k}=${v}`)
      .join("; ")}`,
  ];
  return lines.join("\n");
}

function lastRuns(runs: readonly CellRun[]): CellRun[] {
  const last = new Map<string, CellRun>();
  for (const run of runs) last.set(`${run.cells}/${run.cell}`, run);
  return [...last.values()];
}
