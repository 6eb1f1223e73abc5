/** The `round-trip` boundary: the client's view, an RPC command until its durable reply. */
import { z } from "zod";
import type { BoundaryEntry } from "../boundary";
import { floorFields, loadFields, openLoopFields, serviceFields, stackFields } from "./fields";

export const roundTripBoundary: BoundaryEntry = {
  name: "round-trip",
  runsOn: "stack",
  summary: ["RPC commands (replyTo): send to durable reply"],
  // It runs at 1,000/s unless told otherwise, so it takes --duration alone.
  flags: z.object({
    ...loadFields,
    ...stackFields,
    ...openLoopFields,
    ...floorFields,
    ...serviceFields,
  }),
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { pipelineStackReport } = await import("../pipeline-report");
    return runOnStack(options, (context) => pipelineStackReport(context, "round-trip"));
  },
};
