/** The `failover` boundary: the full pipeline on the HA stack while something is killed. */
import { z } from "zod";
import { type BoundaryEntry, intField, oneOf, textFlag, workloadFlag } from "../boundary";

export const failoverFlags = z.object({
  "--fault": oneOf(["datastore-primary", "broker-node", "conductor", "outbox"]).default(
    "datastore-primary",
  ),
  "--faults": intField(1, 100).default(5),
  "--rate": intField(1, 20_000).default(1000),
  "--fault-interval": intField(4, 600).default(10),
  "--workload": workloadFlag().default("alternating"),
  "--seed": intField(0).default(1),
  "--dir": textFlag().optional(),
});
export type FailoverFlags = z.infer<typeof failoverFlags>;

export const failoverBoundary: BoundaryEntry = {
  name: "failover",
  runsOn: "own",
  starts: "its own HA stack",
  summary: ["the full pipeline on the HA stack while a server or service is killed (--fault)"],
  flags: failoverFlags,
  refusesOthers: "it runs its own stack; its length follows --faults",
  run: async (options) => (await import("../failover-run")).runFailoverBench(options),
};
