/**
 * The failover bench: its flags are checked in one place; one real kill of the HA stack's
 * primary, and one of each fault that is not a crash, end in reports whose invariants hold.
 */
import { describe, expect, test } from "bun:test";
import { datastoreFaultKinds } from "../../bench/boundaries/failover";
import { parseFailoverFlags } from "../../bench/failover";
import { benchProblems } from "../../bench/run";
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
    expect(failoverProblems(new Map([["--fault", "primary-freeze,replica-kill"]]))).toEqual([]);
    expect(failoverProblems(new Map([["--fault", "primary-freeze,chaos"]]))[0]).toContain(
      "got chaos",
    );
    expect(failoverProblems(new Map([["--fault", "primary-freeze,conductor"]]))[0]).toContain(
      "conductor runs alone, not in a list",
    );
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

/** Runs `matchd bench failover` with `flags` on its own HA stack; the parsed JSON report. */
async function runFailoverBench(flags: string[]): Promise<FailoverReport> {
  const child = Bun.spawn(
    [...matchdCommand, "bench", "failover", ...flags, "--json"],
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
  return JSON.parse(out) as FailoverReport;
}

interface FailoverReport {
  invariants: Record<string, unknown>;
  faults: {
    killed: string;
    ackedAgainMs?: number;
    eventsAgainMs?: number;
    promotedAfterMs: number;
  }[];
}

/** What every datastore fault must leave: nothing acknowledged lost, nothing false delivered. */
const nothingLostNothingFalse = {
  ok: true,
  acknowledgedCommandsLost: 0,
  commandsWithoutStoredResult: 0,
  commandsWithEventsButNoStoredResult: 0,
  sequenceNumbersReused: 0,
  eventsOfLostCommitsDelivered: 0,
  phantomEvents: 0,
  eventsOutOfStreamOrder: 0,
  eventsWithoutStreamOffset: 0,
  repliesUnlikeTheirStoredResult: 0,
};

describe("bench failover", () => {
  test("one kill under 500 commands/s: nothing lost, no phantom, every figure", async () => {
    const report = await runFailoverBench(["--faults", "1", "--rate", "500"]);
    expect(report.invariants).toMatchObject(nothingLostNothingFalse);
    expect(report.faults).toHaveLength(1);
    const [kill] = report.faults;
    expect(kill!.ackedAgainMs).toBeGreaterThan(0);
    expect(kill!.eventsAgainMs).toBeGreaterThan(0);
    expect(kill!.promotedAfterMs).toBeGreaterThan(0);
  }, 120_000);

  test("one of each fault that is not a crash: nothing acknowledged lost, nothing false delivered", async () => {
    const kinds = datastoreFaultKinds.filter((kind) => kind !== "datastore-primary");
    const report = await runFailoverBench([
      ...["--fault", kinds.join(","), "--faults", String(kinds.length)],
      ...["--rate", "300", "--fault-interval", "4"],
    ]);
    expect(report.invariants).toMatchObject(nothingLostNothingFalse);
    expect(report.faults.map((f) => f.killed.replace(/^.* \((.*)\)$/, "$1"))).toEqual(kinds);
    for (const fault of report.faults) expect(fault.ackedAgainMs).toBeGreaterThan(0);
  }, 300_000);
});
