/** The `feed` boundary: market data to N WebSocket subscribers on top of the full pipeline. */
import { z } from "zod";
import type { BoundaryEntry } from "../boundary";
import { intField, workloadFlag } from "../boundary";
import { openLoopFields, stackFields } from "./fields";

export const feedBoundary: BoundaryEntry = {
  name: "feed",
  runsOn: "stack",
  summary: [
    "the full pipeline with matchd feed on top: --subscribers WebSocket clients keeping",
    "books at --rate, latency beside a plain RabbitMQ consumer's in the same run",
  ],
  flags: z.object({
    "--workload": workloadFlag().optional(),
    "--seed": intField(0).optional(),
    "--subscribers": intField(1, 5000).optional(),
    "--stalled": intField(0, 100).optional(),
    ...stackFields,
    ...openLoopFields,
  }),
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { feedStackReport } = await import("../feed-report");
    return runOnStack(options, feedStackReport);
  },
};
