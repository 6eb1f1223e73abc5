// The bench's own lifecycle, from the command line: bad flags are all reported before any
// stack starts, an interrupt while its private stack is still starting leaves no server
// behind, and a stack someone else started in --dir is left running; a bench on its own stack
// stops its load, services and stack at SIGTERM too.

import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { stackDown, stackUp } from "../../src/stack/index";
import { isRunning } from "../../src/stack/process";
import { eventually } from "../support/eventually";
import { matchdCommand } from "../support/stack";
import { tempDir } from "../support/temp-dir";

function bench(args: string[], env: Record<string, string> = {}) {
  const child = Bun.spawn([...matchdCommand, "bench", ...args], {
    env: { ...process.env, MATCHING_DATASTORE_URL: "", MATCHING_BROKER_URL: "", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  let stderr = "";
  const reading = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) stderr += decoder.decode(chunk);
  })();
  return { child, stderr: () => stderr, reading };
}

/**
 * Pids recorded in the stack's stack.json that are still running. A zombie counts as gone:
 * a server the bench stopped just before exiting is never reaped by this container's init.
 */
function recordedRunning(dir: string): number[] {
  let record: { processes?: { pid: number; startTicks?: number }[] };
  try {
    record = JSON.parse(readFileSync(join(dir, "stack.json"), "utf8"));
  } catch {
    return [];
  }
  return (record.processes ?? []).filter((p) => isRunning(p.pid, p.startTicks)).map((p) => p.pid);
}

/** Processes other than the bench's own whose command line mentions `dir`. */
function processesUnder(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      const own = cmdline.includes("bun test") || cmdline.includes(" bench ");
      if (cmdline.includes(dir) && !own) found.push(`${pid} ${cmdline}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

test("every bad bench flag is reported at once, before any stack starts", async () => {
  const run = bench(["full-pipeline", "--commands", "abc", "--rate", "x", "--workload", "nope"]);
  expect(await run.child.exited).toBe(2);
  await run.reading;
  for (const problem of [
    "--workload must be one of",
    "--commands must be an integer >= 1, got abc",
    "--rate must be an integer >= 1, got x",
  ])
    expect(run.stderr()).toContain(problem);
  expect(run.stderr()).not.toContain("starting private stack");
  // One service URL without the other is a flag problem too.
  const half = bench(["conductor", "--datastore-url", "redis://127.0.0.1:1"]);
  expect(await half.child.exited).toBe(2);
  await half.reading;
  expect(half.stderr()).toContain("give both the datastore and the broker URL");
}, 30_000);

test("an interrupt while the private stack starts stops what it started", async () => {
  const dir = tempDir("matchd-bench-interrupt-");
  const run = bench(["conductor", "--commands", "100", "--dir", dir]);
  // RabbitMQ takes seconds to boot: interrupt once its node is on the way.
  await eventually("rabbitmq starting", () => run.stderr().includes("rabbitmq"), 30_000);
  // The servers the stack recorded so far (epmd and RabbitMQ's wrapper do not name the
  // directory on their command lines, so the record is what counts).
  await eventually("servers recorded", () => recordedRunning(dir).length > 0, 10_000);
  run.child.kill("SIGINT");
  expect(await run.child.exited).toBe(130);
  await eventually(
    "no server left",
    () => recordedRunning(dir).length === 0,
    15_000,
    () => recordedRunning(dir).join(", "),
  );
  expect(processesUnder(dir)).toEqual([]);
}, 90_000);

test("a stack already running in --dir is used and left running", async () => {
  const dir = tempDir("matchd-bench-reuse-");
  const info = await stackUp({ dir });
  try {
    const run = bench(["datastore", "--commands", "50", "--dir", dir]);
    expect(await run.child.exited).toBe(0);
    await run.reading;
    expect(run.stderr()).toContain("reusing it");
    expect(run.stderr()).not.toContain("stopping private stack");
    expect(processesUnder(dir).length).toBeGreaterThan(0);
    expect(info.reused).toBeUndefined();
  } finally {
    await stackDown({ dir });
  }
}, 90_000);

test("a private stack's directory the bench made is removed once the stack is stopped", async () => {
  // TMPDIR points the bench's own temp directory into one this test can list.
  const parent = tempDir("matchd-bench-own-dir-");
  const run = bench(["datastore", "--commands", "50"], { TMPDIR: parent });
  expect(await run.child.exited).toBe(0);
  await run.reading;
  expect(run.stderr()).toContain(`starting private stack in ${parent}/matchd-bench-`);
  expect(run.stderr()).toContain("stopping private stack");
  expect(readdirSync(parent)).toEqual([]);
}, 90_000);

/** The soak's load: a `bench full-pipeline` child writing its series into `dir`. */
function loadChildrenUnder(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      if (cmdline.includes(dir) && cmdline.includes("full-pipeline"))
        found.push(`${pid} ${cmdline}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

test("a SIGTERM to a bench on its own stack stops its load, services and stack", async () => {
  const dir = tempDir("matchd-bench-own-term-");
  const run = bench(["soak", "--rate", "50", "--duration", "120", "--dir", dir]);
  await eventually("the soak's load running", () => loadChildrenUnder(dir).length > 0, 60_000);
  await eventually("servers recorded", () => recordedRunning(dir).length > 0, 10_000);
  run.child.kill("SIGTERM");
  expect(await run.child.exited).toBe(130);
  await eventually(
    "nothing left",
    () => recordedRunning(dir).length + loadChildrenUnder(dir).length === 0,
    20_000,
    () => [...recordedRunning(dir), ...loadChildrenUnder(dir)].join(", "),
  );
  expect(processesUnder(dir)).toEqual([]);
}, 120_000);
