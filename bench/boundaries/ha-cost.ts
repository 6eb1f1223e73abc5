/** The `ha-cost` boundary: what the broker cluster and the HA stack cost, interleaved. */
import { z } from "zod";
import { type BoundaryEntry, intField, textFlag, workloadFlag } from "../boundary";

export const haCostFlags = z.object({
  "--rate": intField(1, 20_000).default(1000),
  "--duration": intField(3, 600).default(20),
  "--commands": intField(100, 1_000_000).default(20_000),
  "--rounds": intField(1, 10).default(2),
  "--workload": workloadFlag().default("alternating"),
  "--dir": textFlag().optional(),
});
export type HaCostFlags = z.infer<typeof haCostFlags>;

export const haCostBoundary: BoundaryEntry = {
  name: "ha-cost",
  runsOn: "own",
  starts: "a plain and an HA stack of its own",
  summary: [
    "full-pipeline on the plain stack, on a broker cluster and on the HA stack,",
    "interleaved in one invocation: what each costs in p99 and throughput",
  ],
  flags: haCostFlags,
  refusesOthers: "it runs full-pipeline on its own stacks",
  run: async (options) => (await import("../ha-cost")).runHaCostBench(options),
};
