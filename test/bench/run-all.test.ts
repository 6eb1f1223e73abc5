/**
 * bench/run-all.sh itself, run on a copy of the repository layout with a stub `matchd` (the
 * fault) and a no-op setup: a failed or crashed run makes the script exit non-zero naming it,
 * an empty report does not break the summary, and an interrupted run stops the script.
 */
import { afterAll, expect, test } from "bun:test";
import { chmodSync, copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runToEnd } from "../support/run-to-end";
import { tempDir } from "../support/temp-dir";

const root = tempDir("matchd-run-all-");
mkdirSync(join(root, "bench"));
mkdirSync(join(root, "scripts"));
copyFileSync(join(import.meta.dir, "../../bench/run-all.sh"), join(root, "bench/run-all.sh"));
writeFileSync(join(root, "scripts/setup.sh"), "exit 0\n");
// Succeeds with a minimal report, except: `sweep` fails an invariant (exit 1 with a report),
// `--batch-max` crashes (exit 3, no report), and with STUB_INTERRUPT `datastore` is interrupted.
const report = (ok: boolean) =>
  JSON.stringify({
    boundary: "stub",
    workload: "w",
    commands: 1,
    commandsPerSecond: 1,
    latencyMs: { p50: 1, p99: 1, p999: 1, max: 1 },
    invariants: { ok },
  });
writeFileSync(
  join(root, "matchd"),
  `#!/bin/sh
echo "$*" >> calls.log
case "$*" in
  *sweep*) echo '${report(false)}'; exit 1 ;;
  *--batch-max*) exit 3 ;;
  *datastore*) if [ -n "$STUB_INTERRUPT" ]; then exit 130; fi ;;
esac
echo '${report(true)}'
`,
);
chmodSync(join(root, "matchd"), 0o755);
afterAll(() => rmSync(root, { recursive: true, force: true }));

// Every `run name ...` line of the script is one call of matchd.
const script = await Bun.file(join(root, "bench/run-all.sh")).text();
const runCount = script.split("\n").filter((line) => /^run [a-z]/.test(line)).length;

async function runAll(env: Record<string, string> = {}) {
  rmSync(join(root, "calls.log"), { force: true });
  const { stdout, stderr, code } = await runToEnd(["bash", "bench/run-all.sh"], {
    cwd: root,
    env: { ...process.env, ...env },
  });
  const calls = await Bun.file(join(root, "calls.log")).text();
  return { stdout, stderr, code, calls: calls.trim().split("\n") };
}

test("failed runs make the script exit non-zero, named, and every run still happens", async () => {
  const { stdout, stderr, code, calls } = await runAll();
  expect(code).toBe(1);
  expect(runCount).toBeGreaterThan(15);
  expect(calls.length).toBe(runCount);
  expect(stderr).toContain("domain-sweep reported a failed invariant (exit 1)");
  expect(stderr).toContain("conductor-batch1 failed with exit 3 and no report");
  expect(stderr).toContain("bench: failed: domain-sweep conductor-batch1");
  expect(stdout).toContain("| conductor-batch1 | no report (the run failed) |");
  expect(stdout).toMatch(/\| domain-sweep \| stub \|.*\| FAILED \|/);
  expect(stdout).toMatch(/\| domain-alternating \| stub \|.*\| ok \|/);
});

test("an interrupted run stops the script there", async () => {
  const { code, calls } = await runAll({ STUB_INTERRUPT: "1" });
  expect(code).toBe(130);
  expect(calls[calls.length - 1]).toContain("bench datastore");
  expect(calls.length).toBeLessThan(runCount);
});
