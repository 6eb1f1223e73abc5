// The outcomes every part of the engine builds the same way: a refusal with its
// order.rejected.v1, and an accepted command's result. No state, no I/O, no clock.

import { EPOCH_ISO } from "./engine-state";
import { EventLog } from "./events";
import { type ResultCode, resultCodeName } from "./result-codes";
import type { CommandEnvelope, CommandOutcome, CommandResult } from "./types";

/** What is known about a command the shell or decodeCommand refused; every field is optional. */
export interface RejectTarget {
  commandId?: string;
  correlationId?: string;
  pairId?: number;
  partition?: number;
  submittedAt?: string;
  orderId?: string;
  userId?: string;
  type?: string;
}

/** Stand-in for a refused command that lacks its id: documented and stable. */
const UNKNOWN_COMMAND_ID = "unidentified";

/** Builds the order.rejected.v1 outcome for a command refused before or by the engine. */
export function reject(
  target: CommandEnvelope | RejectTarget,
  code: ResultCode,
  reason: string,
): CommandOutcome {
  const info = rejectInfo(target);
  const log = new EventLog({
    commandId: info.commandId ?? UNKNOWN_COMMAND_ID,
    correlationId: info.correlationId ?? "",
    partition: info.partition ?? 0,
    pairId: info.pairId ?? 0,
    submittedAt: info.submittedAt ?? EPOCH_ISO,
  });
  const codeName = resultCodeName(code);
  log.push("order.rejected.v1", {
    orderId: info.orderId,
    userId: info.userId,
    pairId: info.pairId,
    commandType: info.type,
    code,
    codeName,
    reason,
  });
  const result: CommandResult = {
    commandId: info.commandId ?? UNKNOWN_COMMAND_ID,
    status: "rejected",
    code,
    codeName,
    reason,
    orderStatus: "rejected",
    events: 1,
  };
  if (info.orderId !== undefined) result.orderId = info.orderId;
  return { result, events: log.events, changes: [] };
}

function rejectInfo(target: CommandEnvelope | RejectTarget): RejectTarget {
  if (!("payload" in target)) return target;
  // An envelope of an unknown type reaches here undecoded: its payload may be anything.
  const payload: { id?: unknown; userId?: unknown } =
    typeof target.payload === "object" && target.payload !== null
      ? (target.payload as { id?: unknown; userId?: unknown })
      : {};
  return {
    commandId: target.commandId,
    correlationId: target.correlationId,
    pairId: target.pairId,
    partition: target.partition,
    submittedAt: target.submittedAt,
    orderId: typeof payload.id === "string" ? payload.id : undefined,
    userId: typeof payload.userId === "string" ? payload.userId : undefined,
    type: target.type,
  };
}

/**
 * The result of an accepted command: its id, code and code name, then `fields` in their
 * order (a result's bytes are stored and replied, so the order is part of them). Not for
 * the place path, which builds its result in place.
 */
export function accepted(
  commandId: string,
  code: ResultCode,
  fields: Omit<CommandResult, "commandId" | "status" | "code" | "codeName">,
): CommandResult {
  return { commandId, status: "accepted", code, codeName: resultCodeName(code), ...fields };
}
