/**
 * The pipeline benchmarks end to end against the running test stack: each boundary
 * starts its own conductor (and outbox), reports JSON with the required fields, and
 * its invariants hold; the HTML report is written.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import amqp from "amqplib";
import Redis from "ioredis";
import { createWorkload } from "../../bench/workloads";
import { MatchingEngine } from "../../src/domain/index";
import { commandQueue, commandQueueArguments } from "../../src/infra/amqp/topology";
import { partitionKeys } from "../../src/infra/valkey/keys";
import { freePorts } from "../../src/stack/process";
import { eventually } from "../support/eventually";
import { matchdCommand, spawnMatchd, testStack } from "../support/stack";
import { tempDir } from "../support/temp-dir";

async function bench(
  args: string[],
): Promise<{ code: number; report: Record<string, unknown>; stderr: string }> {
  const stack = await testStack();
  const child = Bun.spawn(
    [...matchdCommand, "bench", ...args, "--json", "--partition", "5", "--partition-count", "8"],
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
  // SIGTERM first, so the bench stops the conductor and outbox it started: killed outright
  // they would stay on partition 5 and take over the next boundaries' work.
  // The bench allows each service 15 s to stop before it kills it.
  const timer = setTimeout(() => {
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 35_000).unref();
  }, 100_000);
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  clearTimeout(timer);
  let report: Record<string, unknown> = {};
  try {
    report = JSON.parse(stdout) as Record<string, unknown>;
  } catch {
    throw new Error(`bench printed no JSON (exit ${code}):\n${stdout}\n${stderr.slice(-3000)}`);
  }
  return { code, report, stderr };
}

const required = [
  "boundary",
  "durability",
  "workload",
  "commands",
  "seconds",
  "commandsPerSecond",
  "latencyMs",
  "invariants",
  "environment",
];

describe("matchd bench pipeline boundaries", () => {
  test("conductor-ratio: broker alone and conductor alternate, on one conductor", async () => {
    const { code, report, stderr } = await bench([
      "conductor-ratio",
      "--pairs",
      "2",
      "--commands",
      "400",
      "--warmup",
      "100",
    ]);
    expect(code).toBe(0);
    for (const key of required) expect(report).toHaveProperty(key);
    expect(report.boundary).toBe("conductor-ratio");
    expect(report.invariants).toMatchObject({ ok: true, runs: 4, runsWithBrokenInvariants: 0 });
    // One conductor for both pairs: a second would fence the first mid-run.
    expect(stderr.match(/starting conductor/g)).toHaveLength(1);
    const extra = report.extra as Record<string, string | number>;
    const broker = JSON.parse(String(extra.brokerAloneCommandsPerSecond)) as number[];
    const conductor = JSON.parse(String(extra.conductorCommandsPerSecond)) as number[];
    expect(broker).toHaveLength(2);
    expect(conductor).toHaveLength(2);
    expect(report.commandsPerSecond).toBe(Math.round((conductor[0]! + conductor[1]!) / 2));
    expect(extra.ratio).toBeCloseTo((conductor[0]! + conductor[1]!) / (broker[0]! + broker[1]!), 2);
    expect(String(extra.target)).toMatch(/^ratio >= 0.55 \(issue #25\): (met|not met)$/);
  });

  test("full-pipeline: every event reaches the sinks, invariants hold, HTML report written", async () => {
    const dir = tempDir("matchd-bench-test-");
    const html = join(dir, "report.html");
    const { code, report, stderr } = await bench([
      "full-pipeline",
      "--commands",
      "400",
      "--warmup",
      "100",
      "--report",
      html,
    ]);
    expect(stderr).toContain("full-pipeline: timing 400 commands");
    for (const key of required) expect(report).toHaveProperty(key);
    const invariants = report.invariants as Record<string, unknown>;
    expect(invariants).toMatchObject({
      ok: true,
      commandsProcessed: 400,
      commandFailures: 0,
      eventsCreated: 800,
      eventsReceivedBySinks: 800,
      outboxRetries: 0,
      outboxDeadLetters: 0,
      remainingBookDepth: 0,
      replicaConnectedThroughout: true,
    });
    expect(report.durability).toContain("aof-replicated");
    // A run this short reaches no automatic AOF rewrite: one is forced on each server, and
    // the report says so, with the collections each process went through.
    const extra = report.extra as Record<string, string>;
    expect(extra.aofRewrites).toMatch(
      /^primary 1 \(forced with BGREWRITEAOF at [\d.]+ s: .+\), replica 127\.0\.0\.1:\d+ 1 \(forced/,
    );
    expect(extra.gcCollections).toMatch(/^conductor \d+, outbox \d+, bench \d+ \(observed/);
    expect(extra.crossed).toMatch(/^an AOF rewrite on every server|^did not cross: no garbage/);
    expect(Object.keys(report.latencyMs as object).sort()).toEqual([
      "max",
      "p50",
      "p95",
      "p99",
      "p999",
    ]);
    // CPU seconds of every process the run involved, each found on this machine.
    const cpu = JSON.parse(extra.cpuSeconds!) as Record<string, number>;
    expect(Object.keys(cpu).sort()).toEqual(
      ["bench", "broker", "conductor", "outbox", "valkey primary", "valkey replica"].sort(),
    );
    expect(cpu.broker).toBeGreaterThan(0);
    expect(cpu.conductor).toBeGreaterThan(0);
    expect(extra.cpuNotMeasured).toBeUndefined();
    // Figures that are checks are listed as such: the page marks each pass or fail.
    expect(report.checks).toEqual(expect.arrayContaining(["commandFailures", "eventsCreated"]));
    expect(report.checks).not.toContain("eventsExpected");
    expect(code).toBe(0);
    expect(existsSync(html)).toBe(true);
    const page = readFileSync(html, "utf8");
    for (const id of ["throughput", "latency", "backlog", "batch", "gc", "stages", "percentiles"])
      expect(page).toContain(`id="chart-${id}"`);
    // The forced rewrites are shaded on the charts over time.
    expect(page).toMatch(/<title>AOF rewrite \((primary|replica)\): /);
    expect(page).not.toContain("<td>info</td>");
  }, 150_000);

  test("round-trip at an offered rate: latency from the scheduled send, invariants hold", async () => {
    const { code, report } = await bench([
      "round-trip",
      "--rate",
      "200",
      "--commands",
      "300",
      "--warmup",
      "20",
    ]);
    expect(report.boundary).toBe("round-trip");
    expect((report.invariants as Record<string, unknown>).ok).toBe(true);
    expect(report.commands).toBe(300);
    // One in eight commands traced through the conductor's stages, joined with the bench's times.
    expect(String((report.extra as Record<string, unknown>).traceBreakdown)).toMatch(
      /^\d+ commands traced \(1 in 8\), mean per stage: all: broker in [\d.]+, conductor queue [\d.]+, commit [\d.]+, durability [\d.]+, acknowledge [\d.]+, after ack [\d.]+ \(total [\d.]+\) ms; slowest 1 % /,
    );
    // 300 commands offered at 200/s cannot take less than the schedule's 1.5 s.
    expect(report.seconds as number).toBeGreaterThanOrEqual(1.49);
    // The floor: each leg alone at the same rate after the run, summed, and the path over it.
    const extra = report.extra as Record<string, string>;
    const legs = [...extra.floorLegs!.matchAll(/p50 ([\d.]+) p99 ([\d.]+) ms \((\d+)\)/g)];
    expect(extra.floorLegs).toMatch(
      /^broker in: .*; datastore \(group commit \+ WAITAOF 1 1 in slices, .*\): .*; reply: /,
    );
    expect(legs.map((leg) => Number(leg[3]))).toEqual([300, 300, 300]);
    const sum = legs.reduce((total, leg) => total + Number(leg[1]), 0);
    const [, sumP50] = /^p50 ([\d.]+), p99 [\d.]+ /.exec(extra.floorSumMs!) ?? [];
    expect(Number(sumP50)).toBeCloseTo(sum, 2);
    const p50 = (report.latencyMs as { p50: number }).p50;
    // Every timed command counts once: in flight during an AOF rewrite, or outside one.
    const counted = (text: string | undefined) =>
      Number(/\((\d+) commands\)$/.exec(text ?? "")?.[1] ?? 0);
    expect(counted(extra.latencyDuringRewrites) + counted(extra.latencyOutsideRewrites)).toBe(300);
    expect(extra.pathOverFloor).toStartWith(`p50 ${(p50 / Number(sumP50)).toFixed(2)}x, p99 `);
    expect(code).toBe(0);
  }, 150_000);

  test("round-trip --query-load: the conductor's queries run beside it, counted, none failing", async () => {
    const { code, report } = await bench([
      "round-trip",
      "--rate",
      "200",
      "--commands",
      "300",
      "--query-load",
      "2",
      // Passed to the conductor the bench starts, which then refuses the private queries
      // without it: the load must send it (a 401 counts as an error).
      "--http-token",
      "bench-token-0123456789",
    ]);
    expect((report.invariants as Record<string, unknown>).ok).toBe(true);
    const queryLoad = String((report.extra as Record<string, unknown>).queryLoad);
    const [, requests, errors] = /: (\d+) requests \(\d+\/s\), (\d+) errors/.exec(queryLoad) ?? [];
    expect(Number(requests)).toBeGreaterThan(100);
    expect(errors).toBe("0");
    expect(code).toBe(0);
    const refused = Bun.spawnSync([...matchdCommand, "bench", "datastore", "--query-load", "2"]);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr.toString()).toContain(
      "--query-load is a flag of conductor, full-pipeline and round-trip, not of datastore",
    );
  }, 150_000);

  test("conductor with --batch-max 1 still holds every invariant", async () => {
    const { code, report } = await bench([
      "conductor",
      "--commands",
      "200",
      "--warmup",
      "0",
      "--batch-max",
      "1",
    ]);
    expect((report.invariants as Record<string, unknown>).ok).toBe(true);
    expect((report.extra as Record<string, unknown>).batchMax).toBe(1);
    expect(code).toBe(0);
  }, 150_000);

  // Mixed refuses some commands by design; multi-pair leaves pairs resting at the window's
  // edges, so its events are not 2 a command. Both must still pass, on exact counts.
  test("full-pipeline with the mixed workload: refusals are exactly the in-process domain's", async () => {
    const mixed = await bench(["full-pipeline", "--workload", "mixed", "--commands", "3000"]);
    const mixedInvariants = mixed.report.invariants as Record<string, number | boolean>;
    expect(mixedInvariants.ok).toBe(true);
    expect(mixedInvariants.rejectedResults).toBeGreaterThan(0);
    expect(mixedInvariants.rejectedResults).toBe(mixedInvariants.rejectedExpected!);
    expect(mixed.code).toBe(0);
  }, 150_000);

  test("full-pipeline with the multi-pair workload: events are exactly the in-process domain's", async () => {
    const multi = await bench([
      "full-pipeline",
      "--workload",
      "multi-pair",
      "--commands",
      "3001",
      "--warmup",
      "1001",
    ]);
    const multiInvariants = multi.report.invariants as Record<string, number | boolean>;
    expect(multiInvariants.ok).toBe(true);
    expect(multiInvariants.eventsCreated).toBe(multiInvariants.eventsExpected!);
    expect(multi.code).toBe(0);
  }, 150_000);

  test("full-pipeline with the exchange workload: amends, stops, cancel-alls and silent commands complete", async () => {
    // The timed commands include some that emit no event (a cancel-all that finds nothing):
    // the run completes only if a later command's events complete them. The 40th command,
    // the warm-up's last, is one too: nothing follows it before the timed run starts, so its
    // stored result must complete it.
    const engine = new MatchingEngine();
    const workload = createWorkload("exchange", { seed: 1 });
    for (const command of workload.prefill()) engine.apply(command);
    const silentAt: number[] = [];
    for (let i = 0; i < 3040; i++) {
      if (engine.apply(workload.next(i)).events.length === 0) silentAt.push(i);
    }
    expect(silentAt).toContain(39);
    expect(silentAt.filter((i) => i >= 40).length).toBeGreaterThan(0);
    const exchange = await bench([
      "full-pipeline",
      ...["--workload", "exchange", "--commands", "3000", "--warmup", "40"],
    ]);
    const invariants = exchange.report.invariants as Record<string, number | boolean | string>;
    expect(invariants.ok).toBe(true);
    expect(invariants.finalBookDigest).toBe(invariants.expectedBookDigest!);
    expect(exchange.code).toBe(0);
  }, 150_000);

  test("full-pipeline --clock wall: lifecycle orders on the conductor's clock, replayed with its times", async () => {
    const run = await bench([
      "full-pipeline",
      ...["--workload", "exchange", "--clock", "wall", "--rate", "500", "--commands", "3000"],
      ...["--floor-seconds", "0"],
    ]);
    const invariants = run.report.invariants as Record<string, number | boolean | string>;
    expect(invariants.ok).toBe(true);
    // The replay gave the sink's events in the sink's order and the conductor's books.
    expect(invariants.eventOrderDiffersAt).toBe(-1);
    expect(invariants.finalBookDigest).toBe(invariants.expectedBookDigest!);
    expect(invariants.ordersExpired).toBeGreaterThan(0);
    expect(invariants.switchesFired).toBeGreaterThan(0);
    expect(invariants.deadlinesNotInFirstBatch).toBe(0);
    expect(String(run.report.workloadDescription)).toContain("good till");
    expect(run.code).toBe(0);
  }, 150_000);

  test("--clock wall is refused without a rate or with another workload, before any stack starts", async () => {
    const refused = Bun.spawnSync(
      [...matchdCommand, "bench", "full-pipeline", "--clock", "wall", "--workload", "mixed"],
      { stdout: "pipe", stderr: "pipe" },
    );
    const stderr = refused.stderr.toString();
    expect(refused.exitCode).not.toBe(0);
    expect(stderr).toContain("--clock wall needs --rate");
    expect(stderr).toContain("--clock wall needs --workload exchange");
    expect(stderr).not.toContain("private stack");
  });

  test("commands an earlier run left in the partition's queue are purged before the run", async () => {
    // 25 bids of another seed, as an interrupted run leaves them: matched first, they would
    // take this run's asks and leave its own bids resting.
    const stack = await testStack();
    const connection = await amqp.connect(stack.brokerUrl);
    const channel = await connection.createConfirmChannel();
    const queue = commandQueue(5);
    await channel.assertQueue(queue, { durable: true, arguments: commandQueueArguments });
    const leftover = createWorkload("alternating", { seed: 99, partition: 5, partitionCount: 8 });
    const commands = Array.from({ length: 50 }, (_, i) => leftover.next(i));
    for (const bid of commands.filter((_, i) => i % 2 === 0)) {
      channel.sendToQueue(queue, Buffer.from(JSON.stringify(bid)), { persistent: true });
    }
    await channel.waitForConfirms();
    await connection.close();

    const { code, report, stderr } = await bench([
      "conductor",
      "--commands",
      "200",
      "--warmup",
      "0",
    ]);
    expect(report.invariants).toMatchObject({
      ok: true,
      commandsProcessed: 200,
      remainingBookDepth: 0,
    });
    expect(stderr).toContain("purged 25 leftover commands from partition 5's queue");
    expect(code).toBe(0);
  }, 150_000);

  test("a running conductor given by URL must run the bench's durability policy: its label follows it", async () => {
    const stack = await testStack();
    const [port] = await freePorts(1);
    const { child } = spawnMatchd(
      ["conductor", "--partition", "5", "--partition-count", "8", "--http-port", String(port)],
      {
        MATCHING_DATASTORE_URL: stack.datastoreUrl,
        MATCHING_BROKER_URL: stack.brokerUrl,
        MATCHING_DURABILITY: "memory",
      },
    );
    const canary = new Redis(stack.datastoreUrl);
    const canaryKey = `${partitionKeys(5).prefix}canary`;
    await canary.set(canaryKey, "1");
    try {
      await eventually(
        "the conductor answers",
        async () =>
          (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status === 200,
      );
      const { code, stderr } = await bench([
        "conductor",
        "--conductor-url",
        `http://127.0.0.1:${port}`,
        "--commands",
        "50",
      ]).catch((error: Error) => ({ code: -1, stderr: error.message, report: {} }));
      expect(stderr).toContain("runs durability policy memory, the bench aof-replicated");
      expect(code).not.toBe(0);
      // Refused before the partition was reset under the running service.
      expect(await canary.exists(canaryKey)).toBe(1);
    } finally {
      child.kill("SIGTERM");
      await child.exited;
      await canary.del(canaryKey);
      canary.disconnect();
    }
  }, 150_000);

  test("outbox-drain: timed from the outbox's first read until the sink has every event", async () => {
    const { code, report } = await bench(["outbox-drain", "--events", "2000"]);
    expect(report.boundary).toBe("outbox-drain");
    expect(report.invariants).toMatchObject({
      ok: true,
      eventsReceivedBySinks: 2000,
      duplicatesReceived: 0,
      outboxRetries: 0,
      outboxDeadLetters: 0,
    });
    const extra = report.extra as Record<string, number>;
    // The first read comes after the spawn, and the timed window covers the last event.
    expect(extra.firstReadSeconds).toBeGreaterThan(0);
    expect(extra.firstEventSeconds).toBeGreaterThan(0);
    expect(extra.firstEventSeconds!).toBeLessThanOrEqual(extra.lastEventSeconds!);
    expect(report.seconds as number).toBeGreaterThanOrEqual(extra.lastEventSeconds!);
    expect(code).toBe(0);
  }, 150_000);

  test("outbox-drain --sink queued: timed until the stream is empty and the sink's queue holds every event, read and checked after", async () => {
    const { code, report } = await bench(["outbox-drain", "--events", "2000", "--sink", "queued"]);
    expect(report.invariants).toMatchObject({
      ok: true,
      eventsReceivedBySinks: 2000,
      duplicatesReceived: 0,
    });
    const extra = report.extra as Record<string, unknown>;
    expect(extra.sink).toBe("queued");
    // Received only after the window: no arrival times inside it, a read time after it.
    expect(extra.lastEventSeconds).toBe(-1);
    expect(extra.sinkReadSeconds as number).toBeGreaterThan(0);
    expect(code).toBe(0);
  }, 150_000);

  test("--sink is refused outside outbox-drain and with an unknown mode, before any stack starts", async () => {
    for (const [args, message] of [
      [["conductor", "--sink", "queued"], "--sink is a flag of outbox-drain"],
      [["outbox-drain", "--sink", "later"], "--sink must be live or queued, got later"],
    ] as const) {
      const child = Bun.spawn([...matchdCommand, "bench", ...args], {
        stdout: "pipe",
        stderr: "pipe",
      });
      const [stderr, exitCode] = await Promise.all([
        new Response(child.stderr).text(),
        child.exited,
      ]);
      expect(exitCode).toBe(2);
      expect(stderr).toContain(message);
    }
  }, 30_000);

  test("broker --flow events: the outbox's publisher alone, every event confirmed and received once", async () => {
    const { code, report } = await bench(["broker", "--flow", "events", "--events", "2000"]);
    expect(report.boundary).toBe("broker");
    expect(report.invariants).toMatchObject({
      ok: true,
      received: 2000,
      expected: 2000,
      duplicates: 0,
      notAcked: 0,
    });
    expect((report.extra as Record<string, unknown>).flow).toBe("events");
    expect(code).toBe(0);
  }, 150_000);
});
