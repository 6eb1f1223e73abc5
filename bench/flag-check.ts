/**
 * Checks a bench run's flags against its boundary's declaration (registry.ts), before any
 * stack starts: flags it does not take are refused rather than ignored, each value is parsed
 * by its zod schema, and the boundary's own rules between flags run last. main.ts lists these
 * problems with the configuration's, all at once.
 */
import type { BoundaryEntry } from "./boundary";
import { ownFlags } from "./flag-parse";
import { benchValuedFlags, boundaryNamed, takersOf } from "./registry";

export interface UrlsGiven {
  datastoreGiven: boolean;
  brokerGiven: boolean;
}

function refusal(boundary: BoundaryEntry, flag: string): string {
  const why = boundary.refuses?.[flag] ?? boundary.refusesOthers;
  return why === undefined
    ? `${flag} is a flag of ${takersOf(flag)}, not of ${boundary.name}`
    : `${flag} does not apply to ${boundary.name} (${why})`;
}

function urlProblems(boundary: BoundaryEntry, env: UrlsGiven): string[] {
  if (boundary.runsOn === "own" && (env.datastoreGiven || env.brokerGiven))
    return [`${boundary.name} starts ${boundary.starts}: give no datastore or broker URL`];
  if (boundary.runsOn === "stack" && env.datastoreGiven !== env.brokerGiven)
    return [
      "give both the datastore and the broker URL (MATCHING_DATASTORE_URL / --datastore-url and MATCHING_BROKER_URL / --broker-url), or neither (a private stack is started)",
    ];
  return [];
}

/** Each value its schema refuses: "--rate must be an integer >= 1, got x". */
function valueProblems(boundary: BoundaryEntry, flags: ReadonlyMap<string, string>): string[] {
  const parsed = boundary.flags.safeParse(ownFlags(boundary.flags, flags));
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) => {
    const flag = String(issue.path[0]);
    const got = flags.get(flag);
    return issue.message.startsWith("must")
      ? `${flag} ${issue.message}, got ${got}`
      : `${issue.message}, got ${flag} ${got}`;
  });
}

/** Every problem of the bench's flags for `boundaryName`; none means it may run. */
export function benchProblems(
  boundaryName: string,
  flags: ReadonlyMap<string, string>,
  env: UrlsGiven,
  keepStack: boolean,
): string[] {
  const boundary = boundaryNamed(boundaryName);
  if (boundary === undefined) return [`unknown bench boundary ${boundaryName}`];
  const known = benchValuedFlags();
  const refused = [...flags.keys()]
    .filter((flag) => known.includes(flag) && !(flag in boundary.flags.shape))
    .map((flag) => refusal(boundary, flag));
  return [
    ...refused,
    ...urlProblems(boundary, env),
    ...valueProblems(boundary, flags),
    ...(boundary.check?.(flags, keepStack) ?? []),
  ];
}
