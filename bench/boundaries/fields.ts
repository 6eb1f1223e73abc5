/**
 * Flag sets several boundaries share: the workload's, the private stack's, open-loop load's
 * and the running services'. Each boundary file composes its schema from these.
 */
import { httpLimits } from "../../src/infra/http/app";
import { intField, textFlag, workloadFlag } from "../boundary";

export const loadFields = {
  "--workload": workloadFlag().optional(),
  "--commands": intField(1).optional(),
  "--seed": intField(0).optional(),
  "--warmup": intField(0).optional(),
};

export const stackFields = {
  "--dir": textFlag().optional(),
  "--report": textFlag().optional(),
};

export const openLoopFields = {
  "--rate": intField(1).optional(),
  "--duration": intField(1).optional(),
};

/** How long each leg of the path's floor runs after an open-loop run (0: no floor). */
export const floorFields = {
  "--floor-seconds": intField(0, 60).optional(),
};

/** Running services given by URL, the side-door query load, and the series file. */
export const serviceFields = {
  "--conductor-url": textFlag().optional(),
  // No more loops than the conductor serves requests at once.
  "--query-load": intField(1, httpLimits.concurrentRequests).optional(),
  "--series": textFlag().optional(),
};

/** Closed loop runs a command count: a duration means nothing without a rate. */
export function durationNeedsRate(flags: ReadonlyMap<string, string>): string[] {
  return flags.has("--duration") && !flags.has("--rate")
    ? ["--duration needs --rate (closed loop runs a command count)"]
    : [];
}

/** Lifecycle orders need the exchange workload, and a rate to set their virtual clock. */
export function wallClockNeeds(flags: ReadonlyMap<string, string>): string[] {
  if (!flags.has("--clock")) return [];
  const problems: string[] = [];
  if (!flags.has("--rate"))
    problems.push("--clock wall needs --rate (the orders' lifetimes count from each send)");
  if (flags.get("--workload") !== "exchange")
    problems.push("--clock wall needs --workload exchange (the one with lifecycle orders)");
  return problems;
}
