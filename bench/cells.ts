import { join } from "node:path";
import type { StackInfo } from "../src/stack/index";
import { readRecord, toInfo } from "../src/stack/record";
import { type CellsFlags, cellsFlags } from "./boundaries/cells";
import {
  busiestInterrupts,
  CellCpu,
  type ProcessFacts,
  processFacts,
  readInterrupts,
  withDescendants,
} from "./cell-processes";
import { type CellRun, cellsReport, renderCells } from "./cells-report";
import { parseBenchFlags } from "./flag-parse";
import { type OwnBenchOptions, OwnRun } from "./own-run";
import { type PipelineChild, spawnPipeline } from "./soak-child";
import { spawnSelf } from "./spawn-self";

export async function runCellsBench(options: OwnBenchOptions): Promise<number> {
  const { progress } = options;
  const flags = parseBenchFlags(cellsFlags, options.flags);
  const counts = flags["--cells"].split(",").map(Number);
  const cells = Math.max(...counts);
  const own = new OwnRun(options, "cells");
  const dirs = own.stacksIn(...Array.from({ length: cells }, (_, k) => `cell-${k}`));
  return own.run(async () => {
    const stacks: StackInfo[] = [];
    for (let k = 0; k < cells; k++) {
      progress(`starting cell ${k}'s stack on CPU ${k} in ${dirs[k]}`);
      stacks.push(await pinnedStackUp(dirs[k]!, k));
    }
    const runs: CellRun[] = [];
    for (let round = 1; round <= flags["--rounds"]; round++) {
      for (const count of counts) {
        // Fewer cells than CPUs run on each set of CPUs in turn: a cell alone on CPU 0 and one
        // alone on CPU 1 differ (the disk's interrupts land on one CPU), and the report
        // divides by the better one.
        for (let first = 0; first + count <= cells; first += count) {
          const group = Array.from({ length: count }, (_, i) => first + i);
          progress(
            `round ${round}: cells ${group.join(", ")} at once, ${flags["--commands"]} commands each`,
          );
          runs.push(...(await runCells(group, stacks, round, flags, own)));
        }
      }
    }
    const report = cellsReport(runs, flags);
    process.stdout.write(`${options.json ? JSON.stringify(report) : renderCells(report)}\n`);
    return report.invariants.ok ? 0 : 1;
  });
}

/** `matchd stack up` under `taskset -c cpu`: every server it starts inherits the CPU. */
async function pinnedStackUp(dir: string, cpu: number): Promise<StackInfo> {
  const child = spawnSelf(["stack", "up", "--dir", dir, "--no-tap"], {
    prefix: ["taskset", "-c", String(cpu)],
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, errors] = await Promise.all([child.exited, new Response(child.stderr).text()]);
  const record = readRecord(dir);
  if (code !== 0 || record?.status !== "up") {
    throw new Error(`cell stack in ${dir} did not start (exit ${code}):\n${errors.slice(-2000)}`);
  }
  return toInfo(record);
}

/**
 * Runs the cells of `group` at once, cell k on CPU k with its own stack and full-pipeline
 * child; the i-th cell of the group runs partition i of the group's size.
 */
async function runCells(
  group: readonly number[],
  stacks: readonly StackInfo[],
  round: number,
  flags: CellsFlags,
  own: OwnRun,
): Promise<CellRun[]> {
  const dir = own.dir;
  const started = performance.now();
  const count = group.length;
  const interruptsBefore = readInterrupts();
  const cells = group.map((k, partition) => {
    const stack = stacks[k]!;
    const servers = withDescendants(Object.values(stack.pids));
    const child = spawnPipeline({
      urls: stack,
      args: ["--workload", flags["--workload"], "--commands", String(flags["--commands"])],
      durability: "aof-replicated",
      cpus: String(k),
      env: { MATCHING_PARTITION: String(partition), MATCHING_PARTITION_COUNT: String(count) },
      seriesFile: join(dir, `cell-${k}-of-${count}-round-${round}.json`),
      onTeardown: (stop) => own.onTeardown(stop),
    });
    const cpu = new CellCpu(stack.pids, child.pid);
    return { k, partition, child, servers, cpu };
  });
  const sampler = setInterval(() => {
    for (const cell of cells) cell.cpu.sample();
  }, 500);
  const affinity = await sampleWhileLoaded(cells.map((c) => c.child));
  const finished = await Promise.all(cells.map((c) => c.child.finished())).finally(() =>
    clearInterval(sampler),
  );
  const wallSeconds = (performance.now() - started) / 1000;
  const interrupts = busiestInterrupts(interruptsBefore, readInterrupts());
  return cells.map(({ k, partition, child, servers, cpu }, i) => {
    const { pipeline } = finished[i]!;
    cpu.sample();
    const cpuByComponent = cpu.totals();
    // The servers' share of what CellCpu sampled: everything but the bench child's processes.
    let serversCpu = 0;
    for (const name of Object.keys(stacks[k]!.pids)) serversCpu += cpuByComponent[name] ?? 0;
    const processes = [...processFacts(servers), ...(affinity.get(child.pid) ?? [])];
    return {
      cells: count,
      group: group[0]!,
      round,
      cell: k,
      partition,
      cpu: String(k),
      commandsPerSecond: Math.round(pipeline.commandsPerSecond),
      p50: pipeline.latencyMs.p50,
      p99: pipeline.latencyMs.p99,
      p999: pipeline.latencyMs.p999,
      invariantsOk: pipeline.exitCode === 0 && pipeline.invariants.ok,
      invariants: pipeline.invariants,
      pipelineCpuSeconds: pipeline.cpuSeconds,
      serversCpuSeconds: Math.round(serversCpu * 100) / 100,
      cpuByComponent,
      wallSeconds,
      interrupts,
      processes: processes.map((p) => ({ ...p, shared: p.cpusAllowed !== String(k) })),
    };
  });
}

/**
 * Once every child has begun its timed load, each child and its descendants (the conductor
 * and outbox it started) as the OS reports them while they run: the affinity read-back.
 */
async function sampleWhileLoaded(
  children: readonly PipelineChild[],
): Promise<Map<number, ProcessFacts[]>> {
  const sampled = new Map<number, ProcessFacts[]>();
  while (children.some((c) => c.running() && c.loadStartedAt() === undefined)) {
    await Bun.sleep(200);
  }
  await Bun.sleep(500);
  for (const child of children) {
    sampled.set(child.pid, processFacts(withDescendants([child.pid])));
  }
  return sampled;
}
