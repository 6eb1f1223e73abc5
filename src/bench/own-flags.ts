/**
 * Flags of a boundary that runs stacks of its own (failover, ha-cost): its zod schema is the
 * one place they are checked, and every other bench flag is refused, since it would be ignored.
 */
import type { z } from "zod";
import { benchValuedFlags } from "./flag-names";

type FlagSchema = z.ZodObject<z.ZodRawShape>;

function ownKeys(schema: FlagSchema, flags: ReadonlyMap<string, string>): [string, string][] {
  const known = Object.keys(schema.shape);
  return [...flags].filter(([flag]) => known.includes(flag));
}

/** Every problem of `flags` for `boundary`; `why` says why another boundary's flag is refused. */
export function ownFlagProblems(
  boundary: string,
  schema: FlagSchema,
  flags: ReadonlyMap<string, string>,
  why: string,
): string[] {
  const own = Object.keys(schema.shape);
  const problems = benchValuedFlags
    .filter((flag) => flag !== "--dir" && !own.includes(flag) && flags.has(flag))
    .map((flag) => `${flag} does not apply to ${boundary} (${why})`);
  const parsed = schema.safeParse(Object.fromEntries(ownKeys(schema, flags)));
  if (!parsed.success)
    for (const issue of parsed.error.issues)
      problems.push(`${String(issue.path[0])}: ${issue.message}`);
  return problems;
}

/** The flags parsed by `schema`, defaults filled in; ownFlagProblems has found none. */
export function parseOwnFlags<S extends FlagSchema>(
  schema: S,
  flags: ReadonlyMap<string, string>,
): z.infer<S> {
  return schema.parse(Object.fromEntries(ownKeys(schema, flags)));
}
