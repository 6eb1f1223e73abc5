/**
 * The failover bench: its flags are checked in one place, and one real kill of the HA stack's
 * primary ends in a report whose invariants hold and whose kill row has every figure.
 */
import { describe, expect, test } from "bun:test";
import { parseFailoverFlags } from "../../src/bench/failover";
import { benchProblems } from "../../src/bench/run";
import { matchdCommand } from "../support/stack";

const env = { datastoreGiven: false, brokerGiven: false };

function withoutStackUrls(): Record<string, string | undefined> {
  const { MATCHING_DATASTORE_URL, MATCHING_BROKER_URL, MATCHING_REPLICA_URL, ...rest } =
    process.env;
  return rest;
}

/** The report's failed checks with their counts, or why there is no report. */
function failedChecks(out: string): string {
  try {
    const { invariants } = JSON.parse(out) as { invariants: Record<string, unknown> };
    const failed = Object.keys(invariants).filter((k) => k !== "ok" && invariants[k] === false);
    return `failed checks: ${failed.map((k) => `${k} (${String(invariants[k.replace(/Ok$/, "")])})`).join(", ")}`;
  } catch {
    return "no JSON report on stdout";
  }
}

describe("failover flags", () => {
  test("defaults, bounds and the flags of other boundaries", () => {
    expect(parseFailoverFlags(new Map())).toMatchObject({
      "--fault": "datastore-primary",
      "--faults": 5,
      "--rate": 1000,
      "--fault-interval": 10,
    });
    const failoverProblems = (flags: ReadonlyMap<string, string>) =>
      benchProblems("failover", flags, env, false);
    expect(failoverProblems(new Map([["--faults", "0"]]))).toEqual([
      "--faults must be an integer from 1 to 100, got 0",
    ]);
    expect(failoverProblems(new Map([["--fault", "broker-node"]]))).toEqual([]);
    expect(failoverProblems(new Map([["--fault", "chaos"]]))[0]).toContain("--fault");
    expect(failoverProblems(new Map([["--report", "r.html"]]))[0]).toContain(
      "--report does not apply to failover",
    );
    expect(benchProblems("conductor", new Map([["--faults", "3"]]), env, false)).toContain(
      "--faults is a flag of failover, not of conductor",
    );
    expect(
      benchProblems("failover", new Map(), { datastoreGiven: true, brokerGiven: true }, false),
    ).toContain("failover starts its own HA stack: give no datastore or broker URL");
  });
});

describe("bench failover", () => {
  test("one kill under 500 commands/s: nothing lost, no phantom, every figure", async () => {
    const child = Bun.spawn(
      [...matchdCommand, "bench", "failover", "--faults", "1", "--rate", "500", "--json"],
      // Without the suite's stack URLs: failover starts an HA stack of its own.
      { stdout: "pipe", stderr: "pipe", env: withoutStackUrls() },
    );
    const [out, err, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    // On a failure, the log shows why: the failed checks, or the bench's own last words.
    if (code !== 0) console.error(`${failedChecks(out)}\n${err.slice(-3000)}`);
    expect(code).toBe(0);
    const report = JSON.parse(out) as {
      invariants: Record<string, unknown>;
      faults: { ackedAgainMs?: number; eventsAgainMs?: number; promotedAfterMs: number }[];
    };
    expect(report.invariants).toMatchObject({
      ok: true,
      acknowledgedCommandsLost: 0,
      phantomEvents: 0,
      eventsOutOfStreamOrder: 0,
      eventsWithoutStreamOffset: 0,
      repliesUnlikeTheirStoredResult: 0,
    });
    expect(report.faults).toHaveLength(1);
    const [kill] = report.faults;
    expect(kill!.ackedAgainMs).toBeGreaterThan(0);
    expect(kill!.eventsAgainMs).toBeGreaterThan(0);
    expect(kill!.promotedAfterMs).toBeGreaterThan(0);
  }, 120_000);
});
