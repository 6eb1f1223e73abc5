/** The `datastore` boundary: the commit's shape alone against Valkey, closed loop. */
import { z } from "zod";
import { type BoundaryEntry, intField } from "../boundary";
import { loadFields, stackFields } from "./fields";

export const datastoreBoundary: BoundaryEntry = {
  name: "datastore",
  runsOn: "stack",
  summary: ["the commit shape (MULTI..EXEC) alone, memory vs aof-replicated, plus WAITAOF latency"],
  flags: z.object({ ...loadFields, ...stackFields, "--connections": intField(1).optional() }),
  refuses: { "--rate": "it runs closed loop", "--duration": "it runs closed loop" },
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { datastoreReport } = await import("../datastore-report");
    return runOnStack(options, datastoreReport);
  },
};
