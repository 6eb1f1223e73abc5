// The flag table of docs/benchmarks.md is the one the boundaries' declarations generate, and
// each boundary's schema names only flags the argument parser takes a value for.

import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { flagDocs } from "../../bench/boundary";
import { flagTableBlock } from "../../bench/flag-table-doc";
import { benchValuedFlags } from "../../bench/registry";

test("docs/benchmarks.md holds the generated flag table", () => {
  const doc = readFileSync(new URL("../../docs/benchmarks.md", import.meta.url), "utf8");
  // On failure: node_modules/.bin/bun scripts/bench-flag-table.ts
  expect(doc).toContain(flagTableBlock());
});

test("every valued bench flag has a meaning in the table", () => {
  for (const flag of benchValuedFlags()) expect(flagDocs[flag]?.meaning ?? "").not.toBe("");
  expect(Object.keys(flagDocs).sort()).toEqual(benchValuedFlags().sort());
});
