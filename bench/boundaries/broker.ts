/** The `broker` boundary: the broker alone, with the conductor's or the outbox's traffic. */
import { z } from "zod";
import { type BoundaryEntry, intField, oneOf } from "../boundary";
import { durationNeedsRate, loadFields, openLoopFields, stackFields } from "./fields";

export const brokerBoundary: BoundaryEntry = {
  name: "broker",
  runsOn: "stack",
  summary: [
    "the broker alone: commands through a quorum queue to a consumer that only acks;",
    "with --flow events, the outbox's event traffic to a sink queue",
  ],
  flags: z.object({
    ...loadFields,
    ...stackFields,
    ...openLoopFields,
    "--flow": oneOf(["commands", "events"], "must be commands or events").optional(),
    "--events": intField(1).optional(),
  }),
  takesAs: { "--events": "broker --flow events" },
  check: (flags) => {
    const events = flags.get("--flow") === "events";
    return [
      ...durationNeedsRate(flags),
      ...(events && flags.has("--rate") ? ["--flow events runs closed loop; drop --rate"] : []),
      ...(!events && flags.has("--events")
        ? ["--events is a flag of outbox-drain and broker --flow events, not of broker"]
        : []),
    ];
  },
  run: async (options) => {
    const { runOnStack } = await import("../stack-boundary");
    const { brokerReport } = await import("../broker-report");
    return runOnStack(options, brokerReport);
  },
};
