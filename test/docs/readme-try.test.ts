/**
 * The README's "Try it by hand" lines, taken from the README itself so they cannot drift,
 * run in order in bash by the compiled ./matchd, as a newcomer pastes them: they must give
 * a resting bid, a trade and an empty book within 60 seconds, and leave nothing running.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runToEnd } from "../support/run-to-end";

const root = join(import.meta.dir, "../..");

/** The first ```sh block after the "## Try it by hand" heading. */
export function tryItLines(readme: string): string {
  const section = readme.split(/^## Try it by hand$/m)[1];
  if (section === undefined) throw new Error('README has no "## Try it by hand" section');
  const block = /```sh\n([\s\S]*?)```/.exec(section.split(/^## /m)[0]!);
  if (block === null) throw new Error('"## Try it by hand" has no ```sh block');
  return block[1]!;
}

describe("README: try it by hand", () => {
  test("its lines give a resting bid, a trade and an empty book within 60 s", async () => {
    const lines = tryItLines(readFileSync(join(root, "README.md"), "utf8"));
    expect(lines.split("\n").filter(Boolean).length).toBeLessThanOrEqual(15);
    const started = Date.now();
    const run = await runToEnd(["bash", "-c", lines], {
      cwd: root,
      // What a fresh shell has: no MATCHING_* from the test command's own stack.
      env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR },
      killAfterMs: 90_000,
    });
    const elapsedMs = Date.now() - started;
    console.log(`README's try-it lines ran in ${elapsedMs} ms`);
    const output = `${run.stdout}\n--- stderr ---\n${run.stderr}`;
    expect(run.code, output).toBe(0);
    expect(elapsedMs).toBeLessThan(60_000);
    expect(run.stdout, output).toMatch(/^accepted rested \(100\), order .+$/m);
    expect(run.stdout, output).toMatch(/^ {2}bid\s+100\s+1\s+1$/m);
    expect(run.stdout, output).toMatch(/^\S+ deal\.executed\.v1 pair 1 deal 1 @ 100: maker /m);
    expect(run.stdout, output).toMatch(
      /^accepted filled \(102\), order .+, executed 1, remaining 0/m,
    );
    // The empty book comes last: the ask's trade is durable before the query.
    const emptyAt = run.stdout.lastIndexOf("pair 1: empty book");
    expect(emptyAt, output).toBeGreaterThan(run.stdout.indexOf("accepted filled"));
    expect(run.stdout, output).toContain(
      "stopped: valkey-primary, valkey-replica, epmd, rabbitmq, rabbitmq-beam",
    );
  }, 120_000);
});
