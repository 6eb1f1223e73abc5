/** The `full-pipeline` boundary: conductor and outbox until the sinks hold every event. */
import { z } from "zod";
import { type BoundaryEntry, oneOf, textFlag } from "../boundary";
import {
  durationNeedsRate,
  floorFields,
  loadFields,
  openLoopFields,
  serviceFields,
  stackFields,
  wallClockNeeds,
} from "./fields";

export const fullPipelineBoundary: BoundaryEntry = {
  name: "full-pipeline",
  runsOn: "stack",
  summary: ["conductor and outbox together until every event is received by sinks"],
  flags: z.object({
    ...loadFields,
    ...stackFields,
    ...openLoopFields,
    ...floorFields,
    ...serviceFields,
    "--outbox-url": textFlag().optional(),
    "--clock": oneOf(["wall"]).optional(),
  }),
  check: (flags) => [...durationNeedsRate(flags), ...wallClockNeeds(flags)],
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { pipelineStackReport } = await import("../pipeline-report");
    return runOnStack(options, (context) => pipelineStackReport(context, "full-pipeline"));
  },
};
