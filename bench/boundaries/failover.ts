/** The `failover` boundary: the full pipeline on the HA stack while something fails. */
import { z } from "zod";
import { type BoundaryEntry, intField, textFlag, workloadFlag } from "../boundary";

/** Faults of the HA datastore: any list of them runs in turn. */
export const datastoreFaultKinds = [
  "datastore-primary",
  "primary-handover",
  "primary-freeze",
  "primary-partition",
  "primary-isolate",
  "replica-kill",
  "sentinel-kill",
  "replica-standin",
  "two-faults",
] as const;
export type DatastoreFaultKind = (typeof datastoreFaultKinds)[number];
/** Faults that run alone: the broker's, or a service's (run twice, active and standby). */
const aloneFaultKinds = ["broker-node", "conductor", "outbox"] as const;
export type FaultKind = DatastoreFaultKind | (typeof aloneFaultKinds)[number];

/** The kinds of a `--fault` value, in the order they take turns. */
export function faultList(flag: string): FaultKind[] {
  return flag.split(",") as FaultKind[];
}

function faultListProblem(flag: string): string | undefined {
  const kinds = flag.split(",");
  const known = [...datastoreFaultKinds, ...aloneFaultKinds] as readonly string[];
  const unknown = kinds.filter((kind) => !known.includes(kind));
  if (unknown.length > 0) return `must be one or more of ${known.join(", ")}, got ${unknown}`;
  const alone = kinds.filter((kind) => (aloneFaultKinds as readonly string[]).includes(kind));
  if (alone.length > 0 && kinds.length > 1) return `${alone[0]} runs alone, not in a list`;
  return undefined;
}

export const failoverFlags = z.object({
  "--fault": z
    .string()
    .default("datastore-primary")
    .check((ctx) => {
      const problem = faultListProblem(ctx.value);
      if (problem !== undefined)
        ctx.issues.push({ code: "custom", message: problem, input: ctx.value });
    }),
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
  summary: ["the full pipeline on the HA stack while a server or service fails (--fault)"],
  flags: failoverFlags,
  refusesOthers: "it runs its own stack; its length follows --faults",
  run: async (options) => (await import("../failover-run")).runFailoverBench(options),
};
