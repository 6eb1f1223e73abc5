/** The `soak` boundary: the full pipeline open loop for minutes to hours, sampled. */
import { z } from "zod";
import { type BoundaryEntry, intField, textFlag, workloadFlag } from "../boundary";

export const soakFlags = z.object({
  "--rate": intField(1, 20_000).default(2000),
  "--duration": intField(10, 7 * 24 * 3600).default(1800),
  "--sample-seconds": intField(1, 600).default(5),
  "--workload": workloadFlag().default("exchange"),
  "--seed": intField(0, 2 ** 31).default(1),
  /** Seconds into the load at which the replica is SIGKILLed and restarted (a full resync). */
  "--restart-replica-at": intField(1, 7 * 24 * 3600).optional(),
  /** Also write the HTML report, every series plotted over time. */
  "--report": textFlag().optional(),
  "--dir": textFlag().optional(),
});
export type SoakFlags = z.infer<typeof soakFlags>;

export const soakBoundary: BoundaryEntry = {
  name: "soak",
  runsOn: "own",
  starts: "a stack of its own",
  summary: [
    "full-pipeline open loop for minutes to hours, sampled: is memory and disk",
    "bounded once the dedup window (--dedup-retention-s) is crossed",
  ],
  flags: soakFlags,
  refusesOthers: "it runs its own stack at --rate for --duration",
  run: async (options) => (await import("../soak")).runSoakBench(options),
};
