/**
 * The `conductor-ratio` boundary: the conductor against the broker alone, closed loop, in
 * alternating runs of one invocation on one stack, so the ratio is not two machines' moods.
 */
import { z } from "zod";
import { type BoundaryEntry, intField } from "../boundary";
import { loadFields, stackFields } from "./fields";

export const conductorRatioBoundary: BoundaryEntry = {
  name: "conductor-ratio",
  runsOn: "stack",
  summary: [
    "the conductor's closed-loop rate against the broker alone (its ceiling), in --pairs",
    "alternating runs on one stack: medians and their ratio",
  ],
  flags: z.object({
    ...loadFields,
    ...stackFields,
    "--pairs": intField(1, 20).optional(),
  }),
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { conductorRatioReport } = await import("../conductor-ratio-report");
    return runOnStack(options, conductorRatioReport);
  },
};
