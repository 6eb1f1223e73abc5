/** The executable's surface: version, help, usage errors (exit 2) and bad config (exit 2, nothing started). */
import { describe, expect, test } from "bun:test";
import { runToEnd } from "../support/run-to-end";
import { matchdCommand } from "../support/stack";

function matchd(args: string[], env: Record<string, string> = {}) {
  // Every run here must end by itself (a refusal, help, a version); a bound keeps one that
  // started a service by mistake from outliving the test.
  return runToEnd([...matchdCommand, ...args], {
    env: { ...process.env, ...env },
    killAfterMs: 20_000,
  });
}

describe("matchd CLI", () => {
  test("--version prints the version", async () => {
    const { stdout, code } = await matchd(["--version"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^matchd \d+\.\d+\.\d+/);
  });

  test("every subcommand has --help", async () => {
    for (const command of ["conductor", "outbox", "bench", "stack", "check"]) {
      const { stdout, code } = await matchd([command, "--help"]);
      expect(code).toBe(0);
      expect(stdout).toContain(`usage: matchd ${command}`);
    }
  });

  test("unknown subcommand and unknown flag: the problem and where help is, exit 2", async () => {
    const unknownCommand = await matchd(["frobnicate"]);
    expect(unknownCommand.code).toBe(2);
    expect(unknownCommand.stderr).toBe(
      "matchd: unknown command frobnicate\nRun 'matchd --help' for the commands.\n",
    );
    const unknownFlag = await matchd(["conductor", "--turbo"]);
    expect(unknownFlag.code).toBe(2);
    expect(unknownFlag.stderr).toContain("unknown flag --turbo");
    expect(unknownFlag.stderr).toContain("Run 'matchd conductor --help'");
    // The problem stays on screen: no help scrolls it away.
    expect(unknownFlag.stderr).not.toContain("usage:");
    const badPrice = await matchd(
      ["order", "place", "--pair", "1", "--side", "bid", "--price", "abc", "--volume", "1"],
      { MATCHING_BROKER_URL: "amqp://127.0.0.1:1" },
    );
    expect(badPrice.code).toBe(2);
    expect(badPrice.stderr).toContain("--price");
    expect(badPrice.stderr).toContain("Run 'matchd order place --help'");
    expect(badPrice.stderr.trim().split("\n").length).toBeLessThanOrEqual(4);
  });

  test("unknown flags, extra arguments and bad configuration are reported together", async () => {
    const all = await matchd(["outbox", "--turbo", "x", "extra", "--partition", "-5"]);
    expect(all.code).toBe(2);
    for (const problem of [
      "unknown flag --turbo",
      "unexpected argument extra",
      "MATCHING_PARTITION (--partition)",
    ])
      expect(all.stderr).toContain(problem);
  });

  test("a setting's flag the subcommand never reads is refused, with who reads it; its variable is not", async () => {
    const conductor = await matchd(["conductor", "--window", "5", "--lease-ttl-ms", "5000"]);
    expect(conductor.code).toBe(2);
    expect(conductor.stderr).toContain(
      "--window does not apply to conductor (read by: outbox, bench)",
    );
    expect(conductor.stderr).toContain("--lease-ttl-ms does not apply to conductor");
    const outbox = await matchd(["outbox", "--batch-max", "1"]);
    expect(outbox.code).toBe(2);
    expect(outbox.stderr).toContain("--batch-max does not apply to outbox");
    const bench = await matchd(["bench", "domain", "--http-port", "4000"]);
    expect(bench.code).toBe(2);
    expect(bench.stderr).toContain("--http-port does not apply to bench");
    // One environment file serves every process: the conductor's variable is fine for the
    // outbox (refused here only for its bad partition, which stops it before any connection).
    const shared = await matchd(["outbox", "--partition", "-1"], { MATCHING_BATCH_MAX: "5" });
    expect(shared.code).toBe(2);
    expect(shared.stderr).toContain("MATCHING_PARTITION (--partition)");
    expect(shared.stderr).not.toContain("MATCHING_BATCH_MAX (--batch-max):");
    expect(shared.stderr).not.toContain("does not apply");
  });

  test("bench lists its own flag problems with the configuration's, all at once", async () => {
    const all = await matchd([
      "bench",
      "domain",
      "--workload",
      "nope",
      "--commands",
      "0",
      "--partition",
      "-1",
    ]);
    expect(all.code).toBe(2);
    for (const problem of [
      "--workload must be one of",
      "--commands must be an integer >= 1",
      "MATCHING_PARTITION (--partition)",
    ])
      expect(all.stderr).toContain(problem);
  });

  test("a misspelt MATCHING_ variable is named whatever the log level, with bad configuration too", async () => {
    const quiet = await matchd(["check", "--partition", "-1"], {
      MATCHING_LOG_LEVEL: "error",
      MATCHING_DURABLITY: "memory",
    });
    expect(quiet.code).toBe(2);
    expect(quiet.stderr).toContain("MATCHING_DURABLITY is no setting and is ignored");
  });

  test("a valued flag followed by another flag is missing its value; a switch takes none", async () => {
    const missing = await matchd(["outbox", "--partition", "--window", "5"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--partition needs a value");
    const commands = await matchd(["bench", "domain", "--commands", "--json"]);
    expect(commands.code).toBe(2);
    expect(commands.stderr).toContain("--commands needs a value");
    const valuedSwitch = await matchd(["bench", "domain", "--json=true"]);
    expect(valuedSwitch.code).toBe(2);
    expect(valuedSwitch.stderr).toContain("--json takes no value");
  });

  test("a valued flag given twice is refused: the second would silently win", async () => {
    const twice = await matchd(["outbox", "--partition", "1", "--partition=0"]);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain("--partition given more than once");
  });

  test("flags a boundary would ignore are refused with exit 2, every one named", async () => {
    const domain = await matchd([
      "bench",
      "domain",
      "--report",
      "/tmp/never.html",
      "--rate",
      "10",
      "--keep-stack",
    ]);
    expect(domain.code).toBe(2);
    for (const flag of ["--report", "--rate", "--keep-stack"]) {
      expect(domain.stderr).toContain(`${flag} does not apply to domain (in-process, no stack)`);
    }
    const resting = await matchd(["bench", "conductor", "--resting", "10", "--connections", "2"]);
    expect(resting.code).toBe(2);
    expect(resting.stderr).toContain("--resting is a flag of domain, not of conductor");
    expect(resting.stderr).toContain("--connections is a flag of datastore, not of conductor");
    const memory = await matchd(["bench", "domain", "--resting", "10", "--commands", "5"]);
    expect(memory.code).toBe(2);
    expect(memory.stderr).toContain("--commands does not apply to domain --resting");
    const closedLoop = await matchd(["bench", "datastore", "--rate", "5", "--events", "5"]);
    expect(closedLoop.code).toBe(2);
    expect(closedLoop.stderr).toContain("--rate does not apply to datastore");
    expect(closedLoop.stderr).toContain(
      "--events is a flag of outbox-drain and broker --flow events",
    );
    const services = await matchd(["bench", "outbox-drain", "--conductor-url", "http://x:1"]);
    expect(services.stderr).toContain("--conductor-url is a flag of conductor, full-pipeline");
    const outboxUrl = await matchd(["bench", "round-trip", "--outbox-url", "http://x:1"]);
    expect(outboxUrl.stderr).toContain(
      "--outbox-url is a flag of full-pipeline, not of round-trip",
    );
    for (const run of [domain, resting, memory, closedLoop, services, outboxUrl])
      expect(run.stderr).not.toContain("[bench]");
  });

  test("a bad --flow is refused with exit 2 before any stack starts", async () => {
    const sideways = await matchd(["bench", "broker", "--flow", "sideways"]);
    expect(sideways.code).toBe(2);
    expect(sideways.stderr).toContain("--flow must be commands or events, got sideways");
    const notBroker = await matchd(["bench", "domain", "--flow", "events"]);
    expect(notBroker.code).toBe(2);
    expect(notBroker.stderr).toContain("--flow is a flag of broker, not of domain");
    const withRate = await matchd(["bench", "broker", "--flow", "events", "--rate", "100"]);
    expect(withRate.code).toBe(2);
    expect(withRate.stderr).toContain("--flow events runs closed loop");
    for (const run of [sideways, notBroker, withRate]) expect(run.stderr).not.toContain("[bench]");
  });

  test("bad config lists every problem, exits 2 and starts nothing", async () => {
    const { stderr, code } = await matchd(["conductor", "--partition", "x"], {
      MATCHING_DURABILITY: "sometimes",
      MATCHING_DATASTORE_URL: "redis://127.0.0.1:1",
    });
    expect(code).toBe(2);
    expect(stderr).toContain("nothing started");
    expect(stderr).toContain("MATCHING_PARTITION (--partition)");
    expect(stderr).toContain("MATCHING_DURABILITY (--durability)");
    expect(stderr).not.toContain("conductor starting");
  });
});
