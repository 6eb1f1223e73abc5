/** The `cells` boundary: independent cells, one and then N at once, each on a CPU of its own. */
import { availableParallelism } from "node:os";
import { z } from "zod";
import { type BoundaryEntry, intField, textFlag, workloadFlag } from "../boundary";

export const cellsFlags = z.object({
  "--cells": z
    .string()
    .regex(/^[1-9]\d*(,[1-9]\d*)*$/, { error: "must be a list of cell counts, e.g. 1,2" })
    .default("1,2"),
  "--commands": intField(1000, 1_000_000).default(20_000),
  "--rounds": intField(1, 10).default(1),
  "--workload": workloadFlag().default("multi-pair"),
  "--dir": textFlag().optional(),
});
export type CellsFlags = z.infer<typeof cellsFlags>;

export const cellsBoundary: BoundaryEntry = {
  name: "cells",
  runsOn: "own",
  starts: "a stack of its own for each cell",
  summary: [
    "independent cells, each a stack, conductor, outbox and load pinned to a CPU of",
    "its own: one cell, then N at once (--cells), and the ratio",
  ],
  flags: cellsFlags,
  refusesOthers: "each cell is a stack of its own",
  check: (flags) => {
    const counts = (flags.get("--cells") ?? "1,2").split(",").map(Number);
    const cpus = availableParallelism();
    return counts.some((count) => count > cpus)
      ? [`--cells: each cell needs a CPU of its own, and this machine has ${cpus}`]
      : [];
  },
  run: async (options) => (await import("../cells")).runCellsBench(options),
};
