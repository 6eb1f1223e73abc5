// The dead-man's switch: session.cancel-after arms, renews or disarms a user's switch; a
// clock.tick past its deadline fires it, and the user's orders and stops are then cancelled,
// at most as many a tick as the tick has room for, until none is left. No I/O, no clock.

import { pickUsersOrders } from "./cancel";
import type { EngineState } from "./engine-state";
import type { OrderNode } from "./order-book";
import { accepted, reject } from "./outcomes";
import { ResultCodes } from "./result-codes";
import type { StopNode } from "./stop-book";
import type { BookChange, CancelAfterCommand, CommandOutcome } from "./types";
import { cancelResting, cancelStop, waiting } from "./withdraw";

/** The shortest timeout a switch may have. */
export const MIN_CANCEL_AFTER_MS = 1000;
/** The longest: a day. */
export const MAX_CANCEL_AFTER_MS = 86_400_000;

export function cancelAfter(s: EngineState, command: CancelAfterCommand): CommandOutcome {
  const { userId, timeoutMs } = command.payload;
  const inRange = timeoutMs >= MIN_CANCEL_AFTER_MS && timeoutMs <= MAX_CANCEL_AFTER_MS;
  if (!Number.isSafeInteger(timeoutMs) || (timeoutMs !== 0 && !inRange)) {
    return reject(
      command,
      ResultCodes.badTimeout,
      `timeoutMs must be 0 (disarm) or ${MIN_CANCEL_AFTER_MS}..${MAX_CANCEL_AFTER_MS}`,
    );
  }
  const changes: BookChange[] = [];
  const result = accepted(command.commandId, ResultCodes.ok, { events: 0 });
  if (timeoutMs === 0) {
    if (s.switches.delete(userId)) changes.push({ op: "switch-remove", userId });
  } else {
    const deadline = s.now + timeoutMs;
    s.armSwitch(userId, deadline);
    changes.push({ op: "switch-put", userId, deadline });
    result.triggerAt = deadline;
  }
  return { result, events: [], changes };
}

/** Fires a due switch: its session.triggered.v1, and the user's orders join the sweeps. */
export function fireSwitch(
  s: EngineState,
  userId: string,
  deadline: number,
  changes: BookChange[],
): void {
  s.switches.delete(userId);
  changes.push({ op: "switch-remove", userId });
  s.eventLog.push("session.triggered.v1", { userId, triggerAt: deadline });
  s.sweeps.set(userId, deadline);
  changes.push({ op: "sweep-put", userId, deadline });
}

/**
 * Cancels up to `room` orders and stops of fired switches' users, the earliest deadline's
 * user first (then by user id), each user's pairs ascending as a cancel-all goes. A user with
 * nothing left ends its sweep. Returns how many it cancelled.
 */
export function sweep(s: EngineState, room: number, changes: BookChange[]): number {
  if (s.sweeps.size === 0) return 0;
  const users = [...s.sweeps].sort(([a, at], [b, bt]) => at - bt || (a < b ? -1 : a > b ? 1 : 0));
  let done = 0;
  for (const [userId] of users) {
    const picks: (OrderNode | StopNode)[] = [];
    let more = false;
    for (const book of s.sortedBooks()) {
      more = pickUsersOrders(book, userId, picks, room - done);
      if (more) break;
    }
    for (const pick of picks) {
      if (!waiting(s, pick)) continue;
      if ("stopPrice" in pick) cancelStop(s, pick, "cancel-after", s.eventLog, changes);
      else cancelResting(s, pick, "cancel-after", s.eventLog, changes);
    }
    done += picks.length;
    if (more) return done;
    s.sweeps.delete(userId);
    changes.push({ op: "sweep-remove", userId });
  }
  return done;
}
