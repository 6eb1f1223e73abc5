/**
 * The ha-cost bench: its flags are checked in one place, and its report gives medians and
 * ratios per set-up and fails with any run. Its runs against real stacks are in the bench
 * (bench/results/runs-2026-12-02.md), not here: one round costs the suite 44 s.
 */
import { describe, expect, test } from "bun:test";
import { type CostRun, haCostReport, renderHaCost } from "../../bench/ha-cost";
import { benchProblems } from "../../bench/run";

const env = { datastoreGiven: false, brokerGiven: false };
const haCostProblems = (flags: ReadonlyMap<string, string>) =>
  benchProblems("ha-cost", flags, env, false);

describe("ha-cost flags", () => {
  test("bounds, other boundaries' flags, and stack URLs are refused", () => {
    expect(haCostProblems(new Map([["--rounds", "2"]]))).toEqual([]);
    expect(haCostProblems(new Map([["--rounds", "0"]]))).toEqual([
      "--rounds must be an integer from 1 to 10, got 0",
    ]);
    expect(haCostProblems(new Map([["--faults", "3"]]))[0]).toContain(
      "--faults does not apply to ha-cost",
    );
    expect(benchProblems("conductor", new Map([["--rounds", "3"]]), env, false)).toContain(
      "--rounds is a flag of ha-cost and cells, not of conductor",
    );
    expect(
      benchProblems("ha-cost", new Map(), { datastoreGiven: true, brokerGiven: true }, false)[0],
    ).toContain("give no datastore or broker URL");
  });
});

describe("ha-cost report", () => {
  test("medians per set-up, ratios against single, a failed run fails the report", () => {
    const setups = (["single", "broker-cluster", "ha"] as const).map((name) => ({
      name,
      what: name,
      datastoreUrl: "",
      brokerUrl: "",
    }));
    const run = (
      setup: CostRun["setup"],
      round: number,
      loop: CostRun["loop"],
      rate: number,
      p99: number,
      ok = true,
    ): CostRun => ({
      setup,
      round,
      loop,
      commandsPerSecond: rate,
      p50: p99 / 4,
      p99,
      p999: p99 * 2,
      invariantsOk: ok,
    });
    const runs = [
      run("single", 1, "open", 1000, 40),
      run("single", 1, "closed", 6000, 900),
      run("broker-cluster", 1, "open", 998, 200),
      run("broker-cluster", 1, "closed", 3000, 2000),
      run("ha", 1, "open", 997, 300),
      run("ha", 1, "closed", 2400, 3000),
      run("single", 2, "open", 1000, 60),
      run("single", 2, "closed", 5000, 1000),
      run("broker-cluster", 2, "open", 998, 400),
      run("broker-cluster", 2, "closed", 2500, 2100),
      run("ha", 2, "open", 996, 500),
      run("ha", 2, "closed", 2600, 3100),
    ];
    const flags = {
      "--rate": 1000,
      "--duration": 20,
      "--commands": 20000,
      "--rounds": 2,
      "--workload": "alternating",
    } as const;
    const report = haCostReport(setups, runs, flags);
    expect(
      report.summary.map((s) => [
        s.setup,
        s.openP99Ms,
        s.closedPerSecond,
        s.closedRatio,
        s.openP99Ratio,
      ]),
    ).toEqual([
      ["single", 50, 5500, 1, 1],
      ["broker-cluster", 300, 2750, 0.5, 6],
      ["ha", 400, 2500, 0.45, 8],
    ]);
    expect(report.invariants).toEqual({ ok: true, runsWithAFailedInvariant: 0 });
    const failed = haCostReport(
      setups,
      [...runs.slice(1), run("single", 1, "open", 1000, 40, false)],
      flags,
    );
    expect(failed.invariants).toEqual({ ok: false, runsWithAFailedInvariant: 1 });
    expect(renderHaCost(report)).toContain("broker-cluster");
  });
});
