/**
 * The ha-cost bench: its flags are checked in one place, and one short round over the three
 * set-ups ends in a report whose every run held its invariants.
 */
import { describe, expect, test } from "bun:test";
import { haCostProblems } from "../../src/bench/ha-cost";
import { benchProblems } from "../../src/bench/run";
import { matchdCommand } from "../support/stack";

const env = { datastoreGiven: false, brokerGiven: false };

describe("ha-cost flags", () => {
  test("bounds, other boundaries' flags, and stack URLs are refused", () => {
    expect(haCostProblems(new Map([["--rounds", "2"]]))).toEqual([]);
    expect(haCostProblems(new Map([["--rounds", "0"]]))[0]).toStartWith("--rounds:");
    expect(haCostProblems(new Map([["--faults", "3"]]))[0]).toContain(
      "--faults does not apply to ha-cost",
    );
    expect(benchProblems("conductor", new Map([["--rounds", "3"]]), env, false)).toContain(
      "--rounds is a flag of ha-cost, not of conductor",
    );
    expect(
      benchProblems("ha-cost", new Map(), { datastoreGiven: true, brokerGiven: true }, false)[0],
    ).toContain("give no datastore or broker URL");
  });
});

describe("bench ha-cost", () => {
  test("one short round: a row per set-up, every run's invariants held", async () => {
    const { MATCHING_DATASTORE_URL, MATCHING_BROKER_URL, ...rest } = process.env;
    const child = Bun.spawn(
      [
        ...matchdCommand,
        ...["bench", "ha-cost", "--rounds", "1", "--duration", "3", "--commands", "1000", "--json"],
      ],
      // Without the suite's stack URLs: ha-cost starts stacks of its own.
      { stdout: "pipe", stderr: "pipe", env: rest },
    );
    const [out, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    expect(code).toBe(0);
    const report = JSON.parse(out) as {
      invariants: { ok: boolean };
      summary: { setup: string; closedPerSecond: number; openP99Ms: number }[];
      runs: { invariantsOk: boolean }[];
    };
    expect(report.invariants.ok).toBe(true);
    expect(report.summary.map((s) => s.setup)).toEqual(["single", "broker-cluster", "ha"]);
    expect(report.runs).toHaveLength(6);
    for (const row of report.summary) {
      expect(row.closedPerSecond).toBeGreaterThan(0);
      expect(row.openP99Ms).toBeGreaterThan(0);
    }
  }, 180_000);
});
