// The one error the domain throws: a broken internal invariant, which is a bug, never bad input.
// Callers must stop processing the partition rather than log and continue.

export class MatchingInvariantError extends Error {
  override readonly name = "MatchingInvariantError";
  readonly code = "MATCHING_INVARIANT";
  /**
   * The command being applied when the invariant broke, set by the shell that applied it
   * (the engine's checks do not know it): the conductor names it when it halts the partition.
   */
  commandId: string | undefined;
}

/** Throws MatchingInvariantError when `condition` is false; the message is built lazily. */
export function invariant(condition: boolean, message: string | (() => string)): asserts condition {
  if (!condition) {
    throw new MatchingInvariantError(typeof message === "string" ? message : message());
  }
}
