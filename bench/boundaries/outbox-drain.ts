/** The `outbox-drain` boundary: a backlog of events drained from the stream to sink queues. */
import { z } from "zod";
import { type BoundaryEntry, intField, oneOf } from "../boundary";
import { loadFields, stackFields } from "./fields";

export const outboxDrainBoundary: BoundaryEntry = {
  name: "outbox-drain",
  runsOn: "stack",
  summary: ["a backlog of events drained from the stream to sink queues"],
  flags: z.object({
    ...loadFields,
    ...stackFields,
    "--events": intField(1).optional(),
    "--sink": oneOf(["live", "queued"], "must be live or queued").optional(),
  }),
  refuses: { "--rate": "it runs closed loop", "--duration": "it runs closed loop" },
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { outboxDrainReport } = await import("../outbox-drain-report");
    return runOnStack(options, outboxDrainReport);
  },
};
