/**
 * The capacity search: which steps it runs (doubling, then bisection in hundreds), what makes
 * a step hold, and, on the real stack, a search whose every step misses its bound, which ends
 * as a failed report naming it.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { judgeStep, type StepResult, searchCapacity } from "../../bench/capacity";
import { matchdCommand, testStack } from "../support/stack";
import { tempDir } from "../support/temp-dir";

/** A pipeline that holds up to `limit` commands/s, with a p99 that grows with the rate. */
function pipelineUpTo(limit: number) {
  return async (rate: number): Promise<StepResult> => ({
    offered: rate,
    achieved: Math.min(rate, limit),
    seconds: rate <= limit ? 10 : (10 * rate) / limit,
    latencyMs: { p50: 1, p95: 2, p99: rate <= limit ? 10 : 500, p999: 20, max: 30 },
    invariantsOk: true,
    failedInvariants: [],
    maxQueueDepth: rate <= limit ? 10 : rate * 5,
    maxStreamLength: 0,
  });
}

const search = (limit: number) =>
  searchCapacity({
    p99Ms: 25,
    stepSeconds: 10,
    startRate: 1000,
    maxRate: 64_000,
    bisections: 3,
    runStep: pipelineUpTo(limit),
    progress: () => undefined,
  });

describe("capacity search", () => {
  test("doubles until a step fails, then bisects in hundreds", async () => {
    const { sustained, steps } = await search(5300);
    expect(steps.map((s) => s.offered)).toEqual([1000, 2000, 4000, 8000, 6000, 5000, 5500]);
    expect(steps.map((s) => s.held)).toEqual([true, true, true, false, false, true, false]);
    expect(sustained?.offered).toBe(5000);
  });

  test("a start rate that fails is bisected down; nothing held is no rate", async () => {
    expect((await search(700)).steps.map((s) => s.offered)).toEqual([1000, 500, 800, 700]);
    expect((await search(700)).sustained?.offered).toBe(700);
    const { sustained, steps } = await search(50);
    expect(steps.map((s) => s.offered)).toEqual([1000, 500, 300, 200]);
    expect(sustained).toBeUndefined();
  });

  test("a step holds only with its invariants, its bound, its schedule and no backlog", () => {
    const good: StepResult = {
      offered: 1000,
      achieved: 1000,
      seconds: 10.4,
      latencyMs: { p50: 1, p95: 2, p99: 25, p999: 40, max: 50 },
      invariantsOk: true,
      failedInvariants: [],
      maxQueueDepth: 500,
      maxStreamLength: 500,
    };
    expect(judgeStep(good, 25, 10)).toMatchObject({ held: true, reasons: [] });
    const bad = judgeStep(
      {
        ...good,
        seconds: 11.5,
        latencyMs: { ...good.latencyMs, p99: 25.1 },
        invariantsOk: false,
        failedInvariants: ["eventsReceivedBySinks"],
        maxQueueDepth: 501,
        maxStreamLength: 501,
      },
      25,
      10,
    );
    expect(bad.held).toBe(false);
    expect(bad.reasons).toEqual([
      "invariants failed: eventsReceivedBySinks",
      "p99 25.1 ms > 25 ms",
      "took 11.5 s for a 10 s schedule",
      "command queue reached 501 (> 500)",
      "event stream reached 501 (> 500)",
    ]);
  });

  test("on the real stack: steps that all miss the bound end as a failed report", async () => {
    const stack = await testStack();
    const page = join(tempDir("matchd-capacity-report-"), "capacity.html");
    const child = Bun.spawn(
      [
        ...matchdCommand,
        "bench",
        "capacity",
        "--report",
        page,
        "--boundary",
        "round-trip",
        "--rate",
        "400",
        "--step-seconds",
        "2",
        "--p99-ms",
        "1",
        "--json",
        "--partition",
        "6",
        "--partition-count",
        "8",
      ],
      {
        env: {
          ...process.env,
          MATCHING_DATASTORE_URL: stack.datastoreUrl,
          MATCHING_BROKER_URL: stack.brokerUrl,
          MATCHING_LOG_LEVEL: "warn",
        },
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const timer = setTimeout(() => child.kill("SIGTERM"), 120_000);
    const [code, stdout] = await Promise.all([child.exited, new Response(child.stdout).text()]);
    clearTimeout(timer);
    const report = JSON.parse(stdout) as {
      boundary: string;
      invariants: Record<string, unknown>;
      extra: { headline: string; curve: string };
    };
    expect(code).toBe(1);
    expect(report.boundary).toBe("capacity");
    expect(report.invariants).toMatchObject({
      ok: false,
      aRateHeld: false,
      stepsWithOtherFailedInvariants: 0,
    });
    expect(report.extra.headline).toBe(
      "not even 100 commands/s, the lowest rate tried, held at p99 <= 1 ms",
    );
    const steps = report.extra.curve.split(" | ");
    expect(steps.map((s) => s.split("/s")[0])).toEqual(["400", "200", "100"]);
    for (const step of steps) expect(step).toMatch(/not held \(p99 [\d.]+ ms > 1 ms\)$/);
    // The page gives each step a row marked with its verdict, and the latency-throughput chart.
    const html = readFileSync(page, "utf8");
    expect(html.match(/<tr class="fail"><td class="num">(400|200|100)<\/td>/g)?.length).toBe(3);
    expect(html).toMatch(/<svg id="chart-capacity"[^>]*>[\s\S]*?<polyline /);
    expect(html).toContain("p99 bound 1 ms");
    expect(html).not.toContain("no data recorded");
  }, 150_000);
});

test("capacity's flags are refused elsewhere, and the flags it sets itself are refused there", () => {
  const run = (args: string[]) => Bun.spawnSync([...matchdCommand, "bench", ...args]);
  const own = run([
    "capacity",
    "--commands",
    "5",
    "--workload",
    "mixed",
    "--boundary",
    "outbox-drain",
  ]);
  expect(own.exitCode).toBe(2);
  const ownText = own.stderr.toString();
  expect(ownText).toContain(
    "--commands does not apply to capacity (each step's count follows its rate)",
  );
  expect(ownText).toContain("capacity runs the alternating workload only, got --workload mixed");
  expect(ownText).toContain(
    "--boundary must be full-pipeline, conductor or round-trip, got outbox-drain",
  );
  const elsewhere = run(["full-pipeline", "--p99-ms", "5"]);
  expect(elsewhere.exitCode).toBe(2);
  expect(elsewhere.stderr.toString()).toContain(
    "--p99-ms is a flag of capacity, not of full-pipeline",
  );
});
