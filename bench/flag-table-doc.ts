/**
 * The bench's flag table as docs/benchmarks.md holds it: generated from the registry and kept
 * between two markers, so the document cannot drift from what the boundaries accept.
 */
import { flagTable } from "./registry";

export const flagTableStart = "<!-- bench flags: generated from bench/registry.ts -->";
export const flagTableEnd = "<!-- end of bench flags -->";

export function flagTableBlock(): string {
  return `${flagTableStart}\n${flagTable()}\n${flagTableEnd}`;
}

/** `doc` with its block between the markers replaced by `block`. */
export function replaceFlagTable(doc: string, block: string): string {
  const start = doc.indexOf(flagTableStart);
  const end = doc.indexOf(flagTableEnd);
  if (start < 0 || end < start) throw new Error("the flag table's markers are missing");
  return doc.slice(0, start) + block + doc.slice(end + flagTableEnd.length);
}
