// order.amend of an iceberg: only a lower volume, which keeps its time priority and comes
// off the hidden part first, then off the part shown. A new price or a larger volume would
// have to show a new part somewhere: cancel and place instead. No I/O, no clock.

import { addScaled, formatValue, type Scaled, subScaled } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import type { AmendTerms } from "./events";
import type { OrderNode } from "./order-book";
import { toRestingOrder } from "./order-book";
import { accepted, reject } from "./outcomes";
import { ResultCodes } from "./result-codes";
import type { AmendOrderCommand, BookChange, CommandOutcome } from "./types";
import { cancelResting } from "./withdraw";

/** `price` and `total` as parsed from the amend (undefined: not named). */
export function amendIceberg(
  s: EngineState,
  command: AmendOrderCommand,
  node: OrderNode,
  price: Scaled | undefined,
  total: Scaled | undefined,
): CommandOutcome {
  const unfilled = addScaled(node.remaining, node.hidden);
  const executed = subScaled(node.volumeTotal, unfilled);
  const newTotal = total ?? node.volumeTotal;
  if ((price !== undefined && price !== node.price) || newTotal > node.volumeTotal) {
    const why = "an iceberg's amend may only lower its volume: cancel and place instead";
    return reject(command, ResultCodes.unsupportedCombination, why);
  }
  if (newTotal < executed) {
    return reject(command, ResultCodes.amendBelowExecuted, "volume below the executed volume");
  }
  const remainingText = formatValue(unfilled, node.amountDecimals);
  if (newTotal === node.volumeTotal) return unchanged(command, node.id, remainingText);
  const log = s.eventLog;
  log.reset(command);
  const changes: BookChange[] = [];
  const before = termsOf(node);
  const left = subScaled(newTotal, executed);
  node.volumeTotalText = formatValue(newTotal, node.amountDecimals);
  if (left === 0) {
    // As a plain order's: cancelled with the new total named, its numbers as they were.
    log.push("order.amended.v1", amended(node, before, termsOf(node, true), executed));
    cancelResting(s, node, "amend", log, changes);
    return outcome(s, command, "filled", "0", changes);
  }
  node.volumeTotal = newTotal;
  cut(s, node, subScaled(unfilled, left));
  log.push("order.amended.v1", amended(node, before, termsOf(node), executed));
  changes.push({ op: "put", order: toRestingOrder(node) });
  return outcome(s, command, "rested", formatValue(left, node.amountDecimals), changes);
}

/** Takes `volume` off the hidden part first, then off the part shown (its level's total too). */
function cut(s: EngineState, node: OrderNode, volume: Scaled): void {
  if (volume <= node.hidden) {
    node.hidden = subScaled(node.hidden, volume);
    // The digest hashes the hidden part too: the level is hashed again.
    s.bookOf(node.pairId)!.changed(node.level!);
    return;
  }
  const shown = subScaled(node.remaining, subScaled(volume, node.hidden));
  const level = node.level!;
  level.total = subScaled(level.total, subScaled(node.remaining, shown));
  s.bookOf(node.pairId)!.changed(level);
  node.hidden = 0;
  node.remaining = shown;
  node.remainingText = formatValue(shown, node.amountDecimals);
}

function termsOf(node: OrderNode, gone = false): AmendTerms {
  return {
    price: node.priceText,
    volume: gone ? "0" : node.remainingText,
    volumeTotal: node.volumeTotalText,
    hiddenVolume: gone ? "0" : formatValue(node.hidden, node.amountDecimals),
  };
}

function amended(node: OrderNode, before: AmendTerms, after: AmendTerms, executed: Scaled) {
  return {
    orderId: node.id,
    userId: node.userId,
    pairId: node.pairId,
    side: node.side,
    type: "limit" as const,
    priorityKept: true,
    before,
    after,
    executedVolume: formatValue(executed, node.amountDecimals),
  };
}

function outcome(
  s: EngineState,
  command: AmendOrderCommand,
  orderStatus: "filled" | "rested",
  remainingVolume: string,
  changes: BookChange[],
): CommandOutcome {
  return {
    result: accepted(command.commandId, ResultCodes.ok, {
      orderId: command.payload.id,
      orderStatus,
      executedVolume: "0",
      remainingVolume,
      events: s.eventLog.events.length,
    }),
    events: s.eventLog.events,
    changes,
  };
}

function unchanged(command: AmendOrderCommand, orderId: string, remainingVolume: string) {
  return {
    result: accepted(command.commandId, ResultCodes.amendUnchanged, {
      orderId,
      orderStatus: "rested" as const,
      executedVolume: "0",
      remainingVolume,
      events: 0,
    }),
    events: [],
    changes: [],
  };
}
