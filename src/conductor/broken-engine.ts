/**
 * The engine of MATCHD_TEST_BREAK_INVARIANT_ON (a test hook, read in infra/kill-point.ts):
 * applies every command, then reports a broken invariant on the named one, after its effects
 * reached the books, as the worst real break would (its invariant checks run during or after
 * the change).
 */
import {
  type CommandEnvelope,
  type CommandOutcome,
  MatchingEngine,
  MatchingInvariantError,
} from "../domain/index";
import { breakInvariantOn } from "../infra/kill-point";

class BrokenEngine extends MatchingEngine {
  constructor(private readonly poisonCommandId: string) {
    super();
  }

  override apply(command: CommandEnvelope, alreadyAccepted = false): CommandOutcome {
    const outcome = super.apply(command, alreadyAccepted);
    if (command.commandId === this.poisonCommandId) {
      throw new MatchingInvariantError(
        `test hook MATCHD_TEST_BREAK_INVARIANT_ON broke the engine's invariant on ${command.commandId}`,
      );
    }
    return outcome;
  }
}

/** The conductor's engine: the real one, unless the test hook names a command to break on. */
export function conductorEngine(): MatchingEngine {
  return breakInvariantOn === undefined ? new MatchingEngine() : new BrokenEngine(breakInvariantOn);
}
