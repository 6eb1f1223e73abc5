/** The `domain` boundary: the pure matching domain in-process, no stack and no I/O. */
import { z } from "zod";
import type { BoundaryEntry } from "../boundary";
import { intField } from "../boundary";
import { loadFields } from "./fields";

const inProcess = "in-process, no stack";

export const domainBoundary: BoundaryEntry = {
  name: "domain",
  runsOn: "none",
  summary: ["the pure matching domain in-process"],
  flags: z.object({ ...loadFields, "--resting": intField(0).optional() }),
  refuses: Object.fromEntries(
    [
      "--dir",
      "--report",
      "--series",
      "--conductor-url",
      "--outbox-url",
      "--rate",
      "--duration",
      "--events",
      "--connections",
      "--query-load",
      "--boundary",
      "--p99-ms",
      "--step-seconds",
    ].map((flag) => [flag, inProcess]),
  ),
  check: (flags, keepStack) => {
    const problems = keepStack ? [`--keep-stack does not apply to domain (${inProcess})`] : [];
    // The memory measurement loads resting orders; it runs no workload.
    if (flags.has("--resting")) {
      for (const flag of ["--workload", "--commands", "--warmup", "--seed"].filter((f) =>
        flags.has(f),
      ))
        problems.push(`${flag} does not apply to domain --resting (no workload runs)`);
    }
    return problems;
  },
  run: async (options) => {
    const { domainReport } = await import("../domain-bench");
    const { printReport } = await import("../stack-boundary");
    return printReport(domainReport(options.flags), options);
  },
};
