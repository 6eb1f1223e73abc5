/**
 * The bench's boundaries, one file each under boundaries/: its name, what it measures (the
 * line `matchd bench --help` prints), what it runs on and its flags. run.ts dispatches on
 * these names, flag-check.ts checks flags against them, and the CLI's help and the flag table
 * of docs/benchmarks.md are generated from them.
 */

import { brokerBoundary } from "./boundaries/broker";
import { capacityBoundary } from "./boundaries/capacity";
import { cellsBoundary } from "./boundaries/cells";
import { conductorBoundary } from "./boundaries/conductor";
import { conductorRatioBoundary } from "./boundaries/conductor-ratio";
import { datastoreBoundary } from "./boundaries/datastore";
import { domainBoundary } from "./boundaries/domain";
import { failoverBoundary } from "./boundaries/failover";
import { feedBoundary } from "./boundaries/feed";
import { fullPipelineBoundary } from "./boundaries/full-pipeline";
import { haCostBoundary } from "./boundaries/ha-cost";
import { outboxDrainBoundary } from "./boundaries/outbox-drain";
import { roundTripBoundary } from "./boundaries/round-trip";
import { soakBoundary } from "./boundaries/soak";
import type { BoundaryEntry } from "./boundary";
import { flagDocs, listed } from "./boundary";

export type { BoundaryEntry } from "./boundary";

export const boundaryRegistry: readonly BoundaryEntry[] = [
  domainBoundary,
  datastoreBoundary,
  brokerBoundary,
  conductorBoundary,
  conductorRatioBoundary,
  outboxDrainBoundary,
  fullPipelineBoundary,
  roundTripBoundary,
  feedBoundary,
  capacityBoundary,
  failoverBoundary,
  haCostBoundary,
  soakBoundary,
  cellsBoundary,
];

export function boundaryNamed(name: string): BoundaryEntry | undefined {
  return boundaryRegistry.find((b) => b.name === name);
}

/** Every valued bench flag some boundary takes, in the order the boundaries list them. */
export function benchValuedFlags(): string[] {
  return [...new Set(boundaryRegistry.flatMap((b) => Object.keys(b.flags.shape)))];
}

/** The boundaries taking `flag`, as a refusal names them: "a, b and c". */
export function takersOf(flag: string): string {
  const takers = boundaryRegistry.filter((b) => flag in b.flags.shape);
  // A boundary that takes it only with another flag is named so, after the plain ones.
  const plain = takers.filter((b) => b.takesAs?.[flag] === undefined).map((b) => b.name);
  const qualified = takers.flatMap((b) => b.takesAs?.[flag] ?? []);
  return listed([...plain, ...qualified]);
}

/** The `boundaries:` block of `matchd bench --help`. */
export function boundaryHelp(): string {
  const width = Math.max(...boundaryRegistry.map((b) => b.name.length)) + 3;
  return boundaryRegistry
    .flatMap((b) => b.summary.map((line, i) => `  ${(i === 0 ? b.name : "").padEnd(width)}${line}`))
    .join("\n");
}

/** The boundaries taking `flag`, as the flag table and --help list them. */
function boundariesTaking(flag: string): string[] {
  return boundaryRegistry
    .filter((b) => flag in b.flags.shape)
    .map((b) => b.takesAs?.[flag] ?? b.name);
}

const generalFlags: [flag: string, meaning: string, who: string][] = [
  ["--json", "print one JSON object instead of the table", "all"],
  [
    "--keep-stack",
    "leave the private stack running at the end (its directory is printed)",
    "all but domain",
  ],
];

/** The flag table of docs/benchmarks.md: each valued flag, what it means, who takes it. */
export function flagTable(): string {
  const rows = benchValuedFlags().map((flag) => {
    const doc = flagDocs[flag];
    const takers = boundariesTaking(flag).map((name) => `\`${name}\``);
    return `| \`${flag} ${doc?.arg ?? ""}\` | ${doc?.meaning ?? ""} | ${takers.join(", ")} |`;
  });
  return [
    "| flag | meaning | boundaries |",
    "|---|---|---|",
    ...rows,
    ...generalFlags.map(([flag, meaning, who]) => `| \`${flag}\` | ${meaning} | ${who} |`),
  ].join("\n");
}

/** Words of `text` in lines of at most `width` characters. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  return line === "" ? lines : [...lines, line];
}

/** The `flags:` block of `matchd bench --help`; a flag few boundaries take names them first. */
export function flagHelp(): string {
  const column = 22;
  const entries = [
    ...benchValuedFlags().map((flag): [string, string] => {
      const doc = flagDocs[flag];
      const takers = boundariesTaking(flag);
      const who = takers.length <= 3 ? `${listed(takers)}: ` : "";
      return [`${flag} ${doc?.arg ?? ""}`, `${who}${doc?.meaning ?? ""}`];
    }),
    ...generalFlags.map(([flag, meaning]): [string, string] => [flag, meaning]),
  ];
  return entries
    .flatMap(([name, meaning]) => {
      const lines = wrap(meaning, 80 - column);
      const pad = " ".repeat(column);
      const label = `  ${name}`;
      // A name as wide as the column starts its meaning on the next line.
      return label.length >= column
        ? [label, ...lines.map((line) => pad + line)]
        : [label.padEnd(column) + lines[0], ...lines.slice(1).map((line) => pad + line)];
    })
    .join("\n");
}
