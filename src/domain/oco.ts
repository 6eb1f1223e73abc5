// order.place-oco: two orders in one command, linked so that when either fills (even partly),
// triggers, or is cancelled or expires, the other is cancelled in the same command (see
// withdraw.ts breakLink). Each leg goes through the place path. No I/O, no clock.

import { formatValue } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import { type EventLog, eventIdOf } from "./events";
import { toRestingOrder } from "./order-book";
import { reject } from "./outcomes";
import { bookRefusal, expiryRefusal, place } from "./place";
import { crosses } from "./quote-math";
import { type ResultCode, ResultCodes, resultCodeName } from "./result-codes";
import { toStopOrder } from "./stop-book";
import type {
  BookChange,
  CommandOutcome,
  CommandResult,
  EventEnvelope,
  OcoLegResult,
  PlaceOcoCommand,
  PlaceOrderCommand,
  PlaceOrderPayload,
} from "./types";
import type { ParsedPlace, PlaceReject } from "./validate-place";
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
  const refused = listRefusal(s, command, alreadyAccepted);
  if (refused !== undefined) return refused;
  const { legs, listId } = command.payload;
  const [a, b] = legs as [PlaceOrderPayload, PlaceOrderPayload];
  const first = place(s, legCommand(command, a), false);
  if (first.result.status !== "accepted") {
    const code = first.result.code as ResultCode;
    return reject(command, code, `leg 0: ${first.result.reason ?? first.result.codeName}`);
  }
  const second = waits(first) ? place(s, legCommand(command, b), false) : undefined;
  const placed = [first, ...(second === undefined ? [] : [second])];
  const events = placed.flatMap((outcome) => outcome.events);
  const changes = placed.flatMap((outcome) => outcome.changes);
  const results = placed.map(legResult);
  const log = s.eventLog;
  log.reset(command);
  if (second === undefined) {
    // The first leg traded on arrival: the other is never placed, and cancelled as placed.
    results.push(neverPlaced(s, b, log));
  } else if (second.result.status !== "accepted" || !waits(second)) {
    // The second traded (or was refused): the first, waiting, goes.
    withdraw(s, a.id, log, changes);
  } else if (s.waitingOrder(a.id) === undefined) {
    // The second's self-trade prevention took the first: the list is over, the second goes.
    withdraw(s, b.id, log, changes);
  } else {
    link(s, a.id, b.id, listId, changes);
  }
  events.push(...log.events);
  const triggered = placed.reduce((sum, o) => sum + (o.result.triggeredStops ?? 0), 0);
  const result: CommandResult = {
    commandId: command.commandId,
    status: "accepted",
    code: ResultCodes.ok,
    codeName: resultCodeName(ResultCodes.ok),
    orderId: a.id,
    listId,
    legs: results,
    events: events.length,
  };
  if (triggered > 0) result.triggeredStops = triggered;
  return {
    result,
    events: renumbered(events, command.commandId),
    changes,
    acceptedOrderId: a.id,
    // The second leg, unless it was refused (nothing accepted it).
    alsoAcceptedOrderId:
      second === undefined || second.result.status === "accepted" ? b.id : undefined,
  };
}

/**
 * The list refused whole, before either leg is placed: its own rules, a duplicate id, either
 * leg's place checks, and a post-only leg that would take (from the book, or from the first
 * leg once it rests); undefined when it may be placed.
 */
function listRefusal(
  s: EngineState,
  command: PlaceOcoCommand,
  alreadyAccepted: boolean,
): CommandOutcome | undefined {
  const { legs, pairId } = command.payload;
  if (pairId !== command.pairId) {
    return reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
  }
  const why = listReason(command);
  if (why !== undefined) return reject(command, ResultCodes.unsupportedCombination, why);
  const [a, b] = legs as [PlaceOrderPayload, PlaceOrderPayload];
  if (alreadyAccepted || known(s, a.id) || known(s, b.id)) return duplicate(command, a.id);
  for (const [i, leg] of legs.entries()) {
    const refused = legRefusal(s, leg, command.pairId);
    if (refused !== undefined) return reject(command, refused.code, `leg ${i}: ${refused.reason}`);
  }
  for (const [i, leg] of legs.entries()) {
    const refused = legBookRefusal(s, leg);
    if (refused !== undefined) return reject(command, refused.code, `leg ${i}: ${refused.reason}`);
  }
  if (crossesFirst(s, b, a)) {
    return reject(command, ResultCodes.postOnlyWouldTake, "leg 1: post-only order would take");
  }
  return undefined;
}

/** A leg's checks against the book, as its place runs them (place.ts bookRefusal). */
function legBookRefusal(s: EngineState, leg: PlaceOrderPayload): PlaceReject | undefined {
  const parsed = s.validator.validate(leg, leg.pairId);
  if ("code" in parsed) return parsed;
  return bookRefusal(s, leg, parsed, s.bookOf(leg.pairId));
}

/** A post-only second leg that would cross the first, once that rests opposite it. */
function crossesFirst(s: EngineState, leg: PlaceOrderPayload, first: PlaceOrderPayload): boolean {
  if (leg.postOnly !== true || first.side === leg.side || first.type !== "limit") return false;
  const parsed = s.validator.validate(leg, leg.pairId);
  if ("code" in parsed) return false;
  const price = parsed.price;
  const rival = s.validator.validate(first, first.pairId);
  return !("code" in rival) && crosses(leg.side, price, rival.price);
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
function neverPlaced(s: EngineState, leg: PlaceOrderPayload, log: EventLog): OcoLegResult {
  s.orders.finish(leg.id);
  // Its texts as the place path would have made them canonical.
  const parsed = s.validator.validate(leg, leg.pairId) as ParsedPlace;
  const volume = parsed.quoteSized ? "0" : parsed.volumeText;
  log.pushOnPair(leg.pairId, "order.cancelled.v1", {
    orderId: leg.id,
    userId: leg.userId,
    pairId: leg.pairId,
    side: leg.side,
    price: parsed.priceText,
    volume,
    volumeTotal: formatValue(parsed.volumeTotal, leg.amountDecimals),
    executedVolume: "0",
    reason: "oco",
    code: ResultCodes.ok,
    quoteVolume: parsed.quoteSized ? formatValue(parsed.quoteVolume, leg.quoteDecimals) : undefined,
    stopPrice: parsed.stop ? parsed.stopPriceText : undefined,
  });
  return {
    orderId: leg.id,
    code: ResultCodes.ok,
    codeName: resultCodeName(ResultCodes.ok),
    orderStatus: "cancelled",
    executedVolume: "0",
    remainingVolume: volume,
  };
}

/** Cancels a waiting leg, reason oco. */
function withdraw(s: EngineState, id: string, log: EventLog, changes: BookChange[]) {
  const leg = s.waitingOrder(id);
  if (leg === undefined) return;
  if ("stopPrice" in leg) cancelStop(s, leg, "oco", log, changes);
  else cancelResting(s, leg, "oco", log, changes);
}

/** Links the two waiting legs, each with its book change (the ones they rested with lack it). */
function link(s: EngineState, a: string, b: string, listId: string, changes: BookChange[]): void {
  for (const [id, other] of [
    [a, b],
    [b, a],
  ] as const) {
    const found = s.waitingOrder(id)!;
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
