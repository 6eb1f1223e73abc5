/**
 * Writes the bench's flag table into docs/benchmarks.md, between its two markers, from the
 * boundaries' declarations (bench/registry.ts). Run after changing a boundary's flags:
 * `node_modules/.bin/bun scripts/bench-flag-table.ts`; test/docs/bench-flags.test.ts fails
 * while the table and the declarations differ.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { flagTableBlock, replaceFlagTable } from "../bench/flag-table-doc";

const file = new URL("../docs/benchmarks.md", import.meta.url).pathname;
writeFileSync(file, replaceFlagTable(readFileSync(file, "utf8"), flagTableBlock()));
