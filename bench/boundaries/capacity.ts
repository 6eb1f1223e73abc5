/** The `capacity` boundary: the highest offered rate a pipeline sustains within a p99 bound. */
import { z } from "zod";
import { type BoundaryEntry, intField, oneOf } from "../boundary";
import { stackFields } from "./fields";

const ownCounts = "each step's count follows its rate";

export const capacityBoundary: BoundaryEntry = {
  name: "capacity",
  runsOn: "stack",
  summary: ["the highest offered rate a pipeline boundary sustains within a p99 bound"],
  // Its steps run the alternating workload (each must leave the book empty for the next).
  flags: z.object({
    ...stackFields,
    "--workload": oneOf(["alternating"], "capacity runs the alternating workload only").optional(),
    "--seed": intField(0).optional(),
    "--rate": intField(1).optional(),
    "--boundary": oneOf(
      ["full-pipeline", "conductor", "round-trip"],
      "must be full-pipeline, conductor or round-trip",
    ).optional(),
    "--p99-ms": intField(1).optional(),
    "--step-seconds": intField(1).optional(),
  }),
  refuses: Object.fromEntries(
    ["--commands", "--duration", "--warmup", "--query-load"].map((flag) => [flag, ownCounts]),
  ),
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { capacityStackReport } = await import("../pipeline-report");
    return runOnStack(options, capacityStackReport);
  },
};
