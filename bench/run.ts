/**
 * `matchd bench <boundary>`: checks the bench flags against the boundary's declaration
 * (boundaries/<name>.ts), then runs it: its run() brings up what it needs, prints the
 * report (table or JSON, optionally HTML), tears everything down, and exits 1 on a
 * failed invariant.
 */
import { benchProblems } from "./flag-check";
import { boundaryNamed, boundaryRegistry } from "./registry";
import type { BenchRunOptions } from "./stack-boundary";

export { benchProblems } from "./flag-check";
export type { BenchRunOptions } from "./stack-boundary";

export const benchBoundaries: readonly string[] = boundaryRegistry.map((b) => b.name);

export async function runBench(boundary: string, options: BenchRunOptions): Promise<number> {
  const progress = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  // Checked by main.ts already; checked again for callers that come here directly.
  const found = benchProblems(boundary, options.flags, options.env, options.keepStack);
  const entry = boundaryNamed(boundary);
  if (found.length > 0 || entry === undefined) {
    process.stderr.write(found.map((problem) => `matchd: ${problem}\n`).join(""));
    return 2;
  }
  return entry.run({ ...options, progress });
}
