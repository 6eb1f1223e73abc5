// The cells bench's parts that need no stack: its flag checks, the affinity and CPU read-back
// from /proc on a really pinned process, and the report's ratio and shared-CPU check.

import { expect, test } from "bun:test";
import { availableParallelism } from "node:os";
import { cellsFlags } from "../../bench/boundaries/cells";
import {
  busiestInterrupts,
  cpuSeconds,
  processFacts,
  readInterrupts,
  withDescendants,
} from "../../bench/cell-processes";
import { type CellRun, cellsReport } from "../../bench/cells-report";
import { benchProblems } from "../../bench/flag-check";

const cellsProblems = (flags: ReadonlyMap<string, string>) =>
  benchProblems("cells", flags, { datastoreGiven: false, brokerGiven: false }, false);

test("a cell needs a CPU of its own, and only the cells flags apply", () => {
  const tooMany = String(availableParallelism() + 1);
  expect(cellsProblems(new Map([["--cells", `1,${tooMany}`]]))).toContain(
    `--cells: each cell needs a CPU of its own, and this machine has ${availableParallelism()}`,
  );
  expect(cellsProblems(new Map([["--cells", "1,x"]]))).toEqual([
    "--cells must be a list of cell counts, e.g. 1,2, got 1,x",
  ]);
  expect(cellsProblems(new Map([["--rate", "100"]])).join()).toContain("--rate does not apply");
  expect(cellsProblems(new Map([["--cells", "1"]]))).toEqual([]);
});

test("interrupt counts are read per source and CPU", () => {
  const first = readInterrupts();
  expect(first.size).toBeGreaterThan(0);
  const [busiest] = busiestInterrupts(new Map(), first);
  expect(busiest!.perCpu.length).toBe(availableParallelism());
});

test("the read-back sees the CPU a process was pinned to, its children and its CPU time", async () => {
  const child = Bun.spawn(["taskset", "-c", "0", "sh", "-c", "sleep 5 & while :; do :; done"]);
  try {
    await Bun.sleep(300);
    const pids = withDescendants([child.pid]);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    const facts = processFacts(pids);
    expect(facts.map((f) => f.cpusAllowed)).toEqual(facts.map(() => "0"));
    expect(facts.map((f) => f.name)).toContain("sleep");
    await Bun.sleep(300);
    expect(cpuSeconds([child.pid]).get(child.pid)!).toBeGreaterThan(0.1);
  } finally {
    child.kill(9);
    await child.exited;
  }
});

const run = (cells: number, cell: number, rate: number, cpusAllowed = String(cell)): CellRun => ({
  cells,
  group: cells === 1 ? cell : 0,
  round: 1,
  cell,
  partition: cell,
  cpu: String(cell),
  commandsPerSecond: rate,
  p50: 1,
  p99: 2,
  p999: 3,
  invariantsOk: true,
  invariants: { ok: true },
  pipelineCpuSeconds: 1,
  serversCpuSeconds: 1,
  cpuByComponent: { conductor: 0.5 },
  wallSeconds: 1,
  interrupts: [],
  processes: [{ pid: 1, name: "valkey-server", cpusAllowed, shared: cpusAllowed !== String(cell) }],
});

test("the report sums the cells, divides by one cell, and fails a process on another's CPU", () => {
  const flags = cellsFlags.parse({ "--commands": "1000" });
  const report = cellsReport(
    [run(1, 0, 1000), run(1, 1, 1100), run(2, 0, 950), run(2, 1, 910)],
    flags,
  );
  // One cell's figure is the better cell alone: the ratio never flatters two cells.
  expect(report.summary.map((s) => [s.cells, s.totalPerSecond, s.ratio])).toEqual([
    [1, 1100, 1],
    [2, 1860, 1.69],
  ]);
  expect(report.summary[0]!.perCellPerSecond).toEqual([1000, 1100]);
  expect(report.invariants.ok).toBe(true);
  const leaky = cellsReport([run(1, 0, 1000), run(2, 1, 900, "0-1")], flags);
  expect(leaky.invariants).toMatchObject({ ok: false, processesOnAnotherCellsCpu: 1 });
});
