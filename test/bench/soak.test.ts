/**
 * The soak bench end to end, kept short: its flags are checked in one place, and a 15-second
 * run whose replica is SIGKILLed and restarted samples every series, loses nothing acknowledged
 * (the full pipeline's invariants), and says that it was too short to judge boundedness rather
 * than calling it bounded.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { benchProblems } from "../../bench/run";
import { matchdCommand } from "../support/stack";
import { tempDir } from "../support/temp-dir";

describe("soak flags", () => {
  test("bounds and other boundaries' flags are refused", () => {
    const soakProblems = (flags: ReadonlyMap<string, string>) =>
      benchProblems("soak", flags, { datastoreGiven: false, brokerGiven: false }, false);
    expect(soakProblems(new Map([["--duration", "600"]]))).toEqual([]);
    expect(soakProblems(new Map([["--duration", "5"]]))).toEqual([
      "--duration must be an integer from 10 to 604800, got 5",
    ]);
    expect(soakProblems(new Map([["--rounds", "2"]]))[0]).toContain(
      "--rounds does not apply to soak",
    );
    const env = { datastoreGiven: false, brokerGiven: false };
    expect(benchProblems("conductor", new Map([["--sample-seconds", "2"]]), env, false)).toContain(
      "--sample-seconds is a flag of soak, not of conductor",
    );
  });
});

describe("bench soak", () => {
  test("a short run with a replica restart: every series sampled, nothing lost, not judged", async () => {
    const htmlFile = join(tempDir("soak-report"), "soak.html");
    const { MATCHING_DATASTORE_URL, MATCHING_BROKER_URL, ...rest } = process.env;
    const child = Bun.spawn(
      [
        ...matchdCommand,
        ...["bench", "soak", "--rate", "300", "--duration", "15", "--sample-seconds", "1"],
        ...["--dedup-retention-s", "60", "--restart-replica-at", "4", "--json"],
        ...["--report", htmlFile],
      ],
      { stdout: "pipe", stderr: "pipe", env: rest },
    );
    const [out, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    expect(code).toBe(0);
    const report = JSON.parse(out) as {
      invariants: Record<string, unknown>;
      crossedTheWindow: string;
      series: { name: string; first: number; bounded?: boolean }[];
      samples: { rssBytes: Record<string, number> }[];
      perMinute: unknown[];
      achievedCommandsPerSecond: number;
      replicaRestart: { killedAtS: number; restartedAtS: number; onlineAgainAtS: number };
    };
    expect(report.invariants).toMatchObject({
      ok: true,
      fullPipelineInvariants: true,
      replicaOnlineAgainAfterItsRestart: true,
    });
    const restart = report.replicaRestart;
    expect(restart.killedAtS).toBeGreaterThanOrEqual(4);
    expect(restart.onlineAgainAtS).toBeGreaterThan(restart.restartedAtS);
    expect(report.crossedTheWindow).toStartWith("no:");
    expect(report.samples.length).toBeGreaterThanOrEqual(8);
    expect(report.samples[0]!.rssBytes.conductor).toBeGreaterThan(0);
    const names = report.series.map((s) => s.name);
    for (const name of ["valkey primary used_memory", "valkey replica keys", "outbox RSS"])
      expect(names).toContain(name);
    expect(report.series.every((s) => s.bounded === undefined)).toBe(true);
    expect(report.perMinute.length).toBeGreaterThanOrEqual(1);
    expect(report.achievedCommandsPerSecond).toBeGreaterThan(250);
    // Every chart of the HTML report has a line with points.
    const html = readFileSync(htmlFile, "utf8");
    for (const id of ["memory", "keys", "aof", "rss", "heap", "backlog", "minutes"]) {
      const svg = html.slice(html.indexOf(`id="chart-${id}"`));
      expect(svg.slice(0, svg.indexOf("</svg>"))).toContain("<polyline");
    }
  }, 120_000);
});
