// order.place-oco: two orders in one command, linked so that when either fills (even partly),
// triggers, or is cancelled or expires, the other is cancelled in the same command (see
// withdraw.ts breakLink). Each leg goes through the place path. No I/O, no clock.

import type { EngineState } from "./engine-state";
import { eventIdOf } from "./events";
import { toRestingOrder } from "./order-book";
import { reject } from "./outcomes";
import { expiryRefusal, place } from "./place";
import { type ResultCode, ResultCodes, resultCodeName } from "./result-codes";
import { toStopOrder } from "./stop-book";
import type {
  BookChange,
  CommandOutcome,
  EventEnvelope,
  OcoLegResult,
  PlaceOcoCommand,
  PlaceOrderCommand,
  PlaceOrderPayload,
} from "./types";
import type { PlaceReject } from "./validate-place";
import { cancelResting, cancelStop } from "./withdraw";

/** Why the legs cannot make one list; undefined: they can (each is still checked by place). */
function listReason(command: PlaceOcoCommand): string | undefined {
  const { legs, userId, pairId } = command.payload;
  if (legs.length !== 2) return "a one-cancels-other list has two legs";
  const [a, b] = legs as [PlaceOrderPayload, PlaceOrderPayload];
  if (a.id === b.id) return "the legs need two order ids";
  for (const leg of legs) {
    if (leg.userId !== userId || leg.pairId !== pairId)
      return "both legs are the list's user's, on its pair";
    const stop = leg.type === "stop-limit" || leg.type === "stop-market";
    const rests =
      leg.type === "limit" && (leg.timeInForce ?? "gtc") !== "ioc" && leg.timeInForce !== "fok";
    if (!stop && !rests) return "a leg is a GTC or GTD limit order or a stop order";
  }
  if ((a.stp ?? "none") !== (b.stp ?? "none")) return "both legs share one stp mode";
  const decimals = (l: PlaceOrderPayload) =>
    `${l.priceDecimals}/${l.amountDecimals}/${l.quoteDecimals}`;
  if (decimals(a) !== decimals(b)) return "both legs have the pair's precisions";
  return undefined;
}

export function placeOco(
  s: EngineState,
  command: PlaceOcoCommand,
  alreadyAccepted: boolean,
): CommandOutcome {
  const { legs, pairId, listId } = command.payload;
  if (pairId !== command.pairId) {
    return reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
  }
  const why = listReason(command);
  if (why !== undefined) return reject(command, ResultCodes.unsupportedCombination, why);
  const [a, b] = legs as [PlaceOrderPayload, PlaceOrderPayload];
  if (alreadyAccepted || known(s, a.id) || known(s, b.id)) return duplicate(command, a.id);
  // Both legs checked before either is placed: a list is refused whole, or not at all.
  for (const [i, leg] of legs.entries()) {
    const refused = legRefusal(s, leg, command.pairId);
    if (refused !== undefined) return reject(command, refused.code, `leg ${i}: ${refused.reason}`);
  }
  const first = place(s, legCommand(command, a), false);
  if (first.result.status !== "accepted") {
    const code = first.result.code as ResultCode;
    return reject(command, code, `leg 0: ${first.result.reason ?? first.result.codeName}`);
  }
  const results: OcoLegResult[] = [legResult(first)];
  const events = [...first.events];
  const changes = [...first.changes];
  let second: CommandOutcome | undefined;
  if (waits(first)) {
    second = place(s, legCommand(command, legs[1]!), false);
    results.push(legResult(second));
    events.push(...second.events);
    changes.push(...second.changes);
  }
  const log = s.eventLog;
  log.reset(command);
  if (second === undefined) {
    // The first leg traded on arrival: the other is never placed, and cancelled as placed.
    results.push(neverPlaced(s, legs[1]!, log));
  } else if (second.result.status !== "accepted" || !waits(second)) {
    // The second traded (or was refused): the first, waiting, goes.
    withdraw(s, legs[0]!.id, log, changes);
  } else {
    link(s, legs[0]!.id, legs[1]!.id, listId, changes);
  }
  events.push(...log.events);
  return {
    result: {
      commandId: command.commandId,
      status: "accepted",
      code: ResultCodes.ok,
      codeName: resultCodeName(ResultCodes.ok),
      orderId: legs[0]!.id,
      listId,
      legs: results,
      events: events.length,
    },
    events: renumbered(events, command.commandId),
    changes,
    acceptedOrderId: legs[0]!.id,
    alsoAcceptedOrderId: second?.acceptedOrderId ?? legs[1]!.id,
  };
}

/** A leg as the order.place it is, under the list's command id (its events are renumbered). */
function legCommand(command: PlaceOcoCommand, leg: PlaceOrderPayload): PlaceOrderCommand {
  return { ...command, type: "order.place", payload: leg };
}

/** Rested or armed without a trade: the leg waits, and may be linked. */
function waits(outcome: CommandOutcome): boolean {
  const status = outcome.result.orderStatus;
  return (
    (status === "rested" || status === "stop-accepted") && outcome.result.executedVolume === "0"
  );
}

function legResult(outcome: CommandOutcome): OcoLegResult {
  const { orderId, code, codeName, orderStatus, executedVolume, remainingVolume } = outcome.result;
  return { orderId: orderId!, code, codeName, orderStatus, executedVolume, remainingVolume };
}

function known(s: EngineState, id: string): boolean {
  return s.orders.get(id) !== undefined || s.stops.has(id);
}

/** A leg's own checks, as its place would run them before touching anything. */
function legRefusal(
  s: EngineState,
  leg: PlaceOrderPayload,
  pairId: number,
): PlaceReject | undefined {
  const parsed = s.validator.validate(leg, pairId);
  if ("code" in parsed) return parsed;
  return parsed.timeInForce === "gtd" ? expiryRefusal(s, parsed.expireAt) : undefined;
}

function duplicate(command: PlaceOcoCommand, orderId: string): CommandOutcome {
  return {
    result: {
      commandId: command.commandId,
      status: "duplicate",
      code: ResultCodes.duplicateOrder,
      codeName: resultCodeName(ResultCodes.duplicateOrder),
      orderId,
      events: 0,
    },
    events: [],
    changes: [],
  };
}

/** The second leg, accepted and at once cancelled, reason oco: the first traded. */
function neverPlaced(
  s: EngineState,
  leg: PlaceOrderPayload,
  log: EngineState["eventLog"],
): OcoLegResult {
  s.orders.finish(leg.id);
  log.pushOnPair(leg.pairId, "order.cancelled.v1", {
    orderId: leg.id,
    userId: leg.userId,
    pairId: leg.pairId,
    side: leg.side,
    price: leg.price,
    volume: leg.volume,
    volumeTotal: leg.volumeTotal,
    executedVolume: "0",
    reason: "oco",
    code: ResultCodes.ok,
  });
  return {
    orderId: leg.id,
    code: ResultCodes.ok,
    codeName: resultCodeName(ResultCodes.ok),
    orderStatus: "cancelled",
    executedVolume: "0",
    remainingVolume: leg.volume,
  };
}

/** Cancels a waiting first leg, reason oco. */
function withdraw(s: EngineState, id: string, log: EngineState["eventLog"], changes: BookChange[]) {
  const node = s.orders.get(id);
  const stop = s.stops.get(id);
  if (stop !== undefined) cancelStop(s, stop, "oco", log, changes);
  else if (node !== undefined && typeof node === "object")
    cancelResting(s, node, "oco", log, changes);
}

/** Links the two waiting legs, each with its book change (the ones they rested with lack it). */
function link(s: EngineState, a: string, b: string, listId: string, changes: BookChange[]): void {
  for (const [id, other] of [
    [a, b],
    [b, a],
  ] as const) {
    const node = s.orders.get(id);
    const found = node !== undefined && typeof node === "object" ? node : s.stops.get(id)!;
    found.listId = listId;
    found.linked = other;
    if ("stopPrice" in found) changes.push({ op: "stop-put", stop: toStopOrder(found) });
    else changes.push({ op: "put", order: toRestingOrder(found) });
  }
}

/** The list's events numbered 0..n-1 under its command id, whichever leg emitted them. */
function renumbered(events: EventEnvelope[], commandId: string): EventEnvelope[] {
  events.forEach((event, ordinal) => {
    event.ordinal = ordinal;
    event.eventId = eventIdOf(commandId, ordinal, event.type);
  });
  return events;
}
