/**
 * A boundary's flags as its zod schema reads them. Apart from the registry: a boundary's
 * runner parses its own flags, and the registry lists the runners.
 */
import type { z } from "zod";
import type { FlagSchema } from "./boundary";

/** The given flags the boundary takes, as its schema reads them. */
export function ownFlags(
  schema: FlagSchema,
  flags: ReadonlyMap<string, string>,
): Record<string, string> {
  return Object.fromEntries([...flags].filter(([flag]) => flag in schema.shape));
}

/** The flags as the boundary's schema parses them, defaults filled in; checked already. */
export function parseBenchFlags<S extends FlagSchema>(
  schema: S,
  flags: ReadonlyMap<string, string>,
): z.infer<S> {
  return schema.parse(ownFlags(schema, flags));
}
