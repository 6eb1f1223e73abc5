/** The `conductor` boundary: commands published to the queue until processed, no outbox. */
import { z } from "zod";
import type { BoundaryEntry } from "../boundary";
import {
  durationNeedsRate,
  loadFields,
  openLoopFields,
  serviceFields,
  stackFields,
} from "./fields";

export const conductorBoundary: BoundaryEntry = {
  name: "conductor",
  runsOn: "stack",
  summary: ["commands published to the queue until processed (conductor only)"],
  flags: z.object({ ...loadFields, ...stackFields, ...openLoopFields, ...serviceFields }),
  check: durationNeedsRate,
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { pipelineStackReport } = await import("../pipeline-report");
    return runOnStack(options, (context) => pipelineStackReport(context, "conductor"));
  },
};
