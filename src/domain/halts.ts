// pair.halt and pair.resume: a halted pair refuses new orders and amends until resumed.
// No I/O, no clock.

import type { EngineState } from "./engine-state";
import { accepted, reject } from "./outcomes";
import { ResultCodes } from "./result-codes";
import type { BookChange, CommandOutcome, PairControlCommand } from "./types";

export function pairControl(s: EngineState, command: PairControlCommand): CommandOutcome {
  const { pairId, reason } = command.payload;
  if (pairId !== command.pairId) {
    return reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
  }
  const halting = command.type === "pair.halt";
  const halted = s.halts.has(pairId);
  if (halting && halted) {
    return reject(command, ResultCodes.pairAlreadyHalted, "pair is halted already");
  }
  if (!halting && !halted) {
    return reject(command, ResultCodes.pairNotHalted, "pair is not halted");
  }
  const log = s.eventLog;
  log.reset(command);
  let change: BookChange;
  if (halting) {
    s.halts.set(pairId, reason);
    change = { op: "halt", pairId, reason };
  } else {
    s.halts.delete(pairId);
    change = { op: "resume", pairId };
  }
  s.recountExtras();
  log.push(halting ? "pair.halted.v1" : "pair.resumed.v1", { pairId, reason });
  return {
    result: accepted(command.commandId, ResultCodes.ok, { events: 1 }),
    events: log.events,
    changes: [change],
  };
}
