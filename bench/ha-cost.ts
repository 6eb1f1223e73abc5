import { stackUp } from "../src/stack/index";
import { type HaCostFlags, haCostFlags } from "./boundaries/ha-cost";
import { environmentFacts, machineEnvironment } from "./environment";
import { parseBenchFlags } from "./flag-parse";
import { type OwnBenchOptions, OwnRun } from "./own-run";
import { spawnPipeline } from "./soak-child";

interface Setup {
  name: "single" | "broker-cluster" | "ha";
  what: string;
  datastoreUrl: string;
  brokerUrl: string;
}

/** One full-pipeline run's figures, as its JSON report gave them. */
export interface CostRun {
  setup: Setup["name"];
  round: number;
  loop: "open" | "closed";
  commandsPerSecond: number;
  p50: number;
  p99: number;
  p999: number;
  invariantsOk: boolean;
}

export async function runHaCostBench(options: OwnBenchOptions): Promise<number> {
  const { progress } = options;
  const flags = parseBenchFlags(haCostFlags, options.flags);
  const own = new OwnRun(options, "ha-cost");
  const { dir } = own;
  const dirs = own.stacksIn("plain", "ha");
  return own.run(async () => {
    progress(`starting the plain and the HA stack in ${dir}`);
    const log = (line: string) => progress(`stack: ${line}`);
    const plain = await stackUp({ dir: dirs[0]!, log });
    const ha = await stackUp({ dir: dirs[1]!, ha: true, log });
    const setups: Setup[] = [
      {
        name: "single",
        what: "Valkey primary + 1 replica, 1 RabbitMQ node",
        ...urls(plain),
      },
      {
        name: "broker-cluster",
        what: "Valkey primary + 1 replica, 3 RabbitMQ nodes",
        datastoreUrl: plain.datastoreUrl,
        brokerUrl: ha.brokerUrl,
      },
      { name: "ha", what: "3 Valkey nodes under 3 Sentinels, 3 RabbitMQ nodes", ...urls(ha) },
    ];
    const runs: CostRun[] = [];
    for (let round = 1; round <= flags["--rounds"]; round++)
      for (const setup of setups)
        for (const loop of ["open", "closed"] as const) {
          progress(`round ${round}: ${setup.name}, ${loop} loop`);
          runs.push(await runPipeline(setup, round, loop, flags, own));
        }
    const report = haCostReport(setups, runs, flags);
    process.stdout.write(`${options.json ? JSON.stringify(report) : renderHaCost(report)}\n`);
    return report.invariants.ok ? 0 : 1;
  });
}

function urls(info: { datastoreUrl: string; brokerUrl: string }) {
  return { datastoreUrl: info.datastoreUrl, brokerUrl: info.brokerUrl };
}

/** `matchd bench full-pipeline --json` against one set-up, as a child process of this binary. */
async function runPipeline(
  setup: Setup,
  round: number,
  loop: CostRun["loop"],
  flags: HaCostFlags,
  own: OwnRun,
): Promise<CostRun> {
  const size =
    loop === "open"
      ? ["--rate", String(flags["--rate"]), "--duration", String(flags["--duration"])]
      : ["--commands", String(flags["--commands"])];
  const { pipeline: report } = await spawnPipeline({
    onTeardown: (stop) => own.onTeardown(stop),
    urls: setup,
    args: ["--workload", flags["--workload"], ...size],
    durability: "aof-replicated",
  }).finished();
  return {
    setup: setup.name,
    round,
    loop,
    commandsPerSecond: Math.round(report.commandsPerSecond),
    p50: oneDecimal(report.latencyMs.p50),
    p99: oneDecimal(report.latencyMs.p99),
    p999: oneDecimal(report.latencyMs.p999),
    invariantsOk: report.exitCode === 0 && report.invariants.ok,
  };
}

const oneDecimal = (value: number) => Math.round(value * 10) / 10;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export interface HaCostSummary {
  setup: Setup["name"];
  what: string;
  /** Medians over the rounds. */
  openP50Ms: number;
  openP99Ms: number;
  openAchievedPerSecond: number;
  closedPerSecond: number;
  /** Against `single` in the same invocation. */
  closedRatio: number;
  openP99Ratio: number;
}

export function haCostReport(
  setups: readonly Setup[],
  runs: readonly CostRun[],
  flags: HaCostFlags,
) {
  const of = (name: string, loop: CostRun["loop"]) =>
    runs.filter((r) => r.setup === name && r.loop === loop);
  const summary: HaCostSummary[] = setups.map((setup) => ({
    setup: setup.name,
    what: setup.what,
    openP50Ms: oneDecimal(median(of(setup.name, "open").map((r) => r.p50))),
    openP99Ms: oneDecimal(median(of(setup.name, "open").map((r) => r.p99))),
    openAchievedPerSecond: Math.round(
      median(of(setup.name, "open").map((r) => r.commandsPerSecond)),
    ),
    closedPerSecond: Math.round(median(of(setup.name, "closed").map((r) => r.commandsPerSecond))),
    closedRatio: 0,
    openP99Ratio: 0,
  }));
  const base = summary[0]!;
  for (const row of summary) {
    row.closedRatio = Math.round((row.closedPerSecond / base.closedPerSecond) * 100) / 100;
    row.openP99Ratio = Math.round((row.openP99Ms / base.openP99Ms) * 100) / 100;
  }
  const failed = runs.filter((r) => !r.invariantsOk).length;
  return {
    boundary: "ha-cost",
    boundaryStatement:
      "bench full-pipeline (its own conductor and outbox, its invariants; on a broker cluster its sink is a quorum queue) against each set-up in turn; both stacks run throughout, the idle one included, on the same cores",
    durability: "aof-replicated",
    workload: flags["--workload"],
    offered: `open loop ${flags["--rate"]}/s for ${flags["--duration"]} s, closed loop ${flags["--commands"]} commands, ${flags["--rounds"]} round(s) interleaved`,
    summary,
    runs,
    invariants: { ok: failed === 0, runsWithAFailedInvariant: failed },
    environment: Object.fromEntries(environmentFacts(machineEnvironment())),
  };
}

export type HaCostReport = ReturnType<typeof haCostReport>;

export function renderHaCost(report: HaCostReport): string {
  const lines = [
    `boundary    ${report.boundary}: ${report.boundaryStatement}`,
    `durability  ${report.durability}`,
    `workload    ${report.workload}; ${report.offered}`,
    "",
    "setup           open p50 ms  open p99 ms  (x single)  closed /s  (x single)  what",
    ...report.summary.map(
      (s) =>
        `${s.setup.padEnd(15)} ${String(s.openP50Ms).padStart(11)}  ${String(s.openP99Ms).padStart(11)}  ${String(s.openP99Ratio).padStart(11)}  ${String(s.closedPerSecond).padStart(9)}  ${String(s.closedRatio).padStart(10)}  ${s.what}`,
    ),
    "",
    "runs (in order): setup round loop commands/s p50 p99 p99.9 invariants",
    ...report.runs.map(
      (r) =>
        `  ${r.setup} ${r.round} ${r.loop} ${r.commandsPerSecond} ${r.p50} ${r.p99} ${r.p999} ${r.invariantsOk ? "ok" : "FAILED"}`,
    ),
    "",
    `invariants  ok=${report.invariants.ok}  runsWithAFailedInvariant=${report.invariants.runsWithAFailedInvariant}`,
    `environment ${Object.entries(report.environment)
      .map(([k, v]) => `${k}=${v}`)
      .join("; ")}`,
  ];
  return lines.join("\n");
}
