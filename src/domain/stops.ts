// Stop orders: accepting them into their pair's stop book, triggering them from a taker's
// trades and executing them as the orders they hold (cascades bounded), and taking one out.
// No I/O, no clock.

import { formatValue } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import { match } from "./match";
import type { PairBook } from "./order-book";
import { hashId } from "./order-index";
import { accepted } from "./outcomes";
import { ResultCodes } from "./result-codes";
import { type StopNode, toStopOrder } from "./stop-book";
import type {
  BookChange,
  CommandEnvelope,
  CommandOutcome,
  PlaceOrderCommand,
  PlaceOrderPayload,
  StopKind,
} from "./types";
import { ParsedPlace } from "./validate-place";
import { breakLink, removeStop, waiting } from "./withdraw";

/** Stops one command may trigger, cascades included; the rest stay armed (docs/orders.md). */
export const MAX_STOP_TRIGGERS = 64;

/** Puts an accepted stop order in its pair's stop book. */
export function acceptStop(
  s: EngineState,
  command: PlaceOrderCommand,
  parsed: ParsedPlace,
  existing: PairBook | undefined,
): CommandOutcome {
  const payload = command.payload;
  const book = existing ?? s.createBook(command.pairId);
  const stop: StopNode = {
    id: payload.id,
    userId: payload.userId,
    pairId: command.pairId,
    side: payload.side,
    type: payload.type as StopKind,
    price: parsed.price,
    priceText: parsed.priceText,
    stopPrice: parsed.stopPrice,
    stopPriceText: parsed.stopPriceText,
    volume: parsed.volume,
    volumeText: parsed.volumeText,
    volumeTotal: parsed.volumeTotal,
    volumeTotalText: formatValue(parsed.volumeTotal, payload.amountDecimals),
    quoteVolume: parsed.quoteVolume,
    quoteVolumeText: formatValue(parsed.quoteVolume, payload.quoteDecimals),
    quoteSized: parsed.quoteSized,
    timeInForce: parsed.timeInForce,
    stp: parsed.stp,
    timestamp: payload.timestamp,
    sequence: s.nextSequence++,
    priceDecimals: payload.priceDecimals,
    amountDecimals: payload.amountDecimals,
    quoteDecimals: payload.quoteDecimals,
    expireAt: parsed.expireAt,
    listId: "",
    linked: "",
  };
  book.stops.insert(stop);
  s.stops.set(stop.id, stop);
  s.recountExtras();
  s.armExpiry(stop);
  const log = s.eventLog;
  log.reset(command);
  log.push("order.stop-accepted.v1", {
    ...stopTerms(stop),
    quoteVolume: stop.quoteVolumeText,
    timeInForce: stop.timeInForce,
    stp: stop.stp,
    timestamp: stop.timestamp,
    expireAt: stop.expireAt !== 0 ? stop.expireAt : undefined,
  });
  return {
    result: accepted(command.commandId, ResultCodes.stopAccepted, {
      orderId: stop.id,
      orderStatus: "stop-accepted",
      executedVolume: "0",
      remainingVolume: stop.volumeText,
      events: 1,
    }),
    events: log.events,
    changes: [{ op: "stop-put", stop: toStopOrder(stop) }],
    acceptedOrderId: stop.id,
  };
}

/**
 * After a taker finished on `book`: triggers the stops its trades reach, then executes them
 * one by one, first triggered first; their own trades trigger more, up to
 * MAX_STOP_TRIGGERS in the command. Adds the events to the outcome and counts them.
 */
export function triggerStops(
  s: EngineState,
  book: PairBook,
  command: CommandEnvelope,
  outcome: CommandOutcome,
): void {
  if (book.stops.size === 0 || !s.taker.traded) return;
  const pending: StopNode[] = [];
  let triggered = 0;
  for (;;) {
    const taker = s.taker;
    if (taker.traded && triggered < MAX_STOP_TRIGGERS && !s.halts.has(book.pairId)) {
      const trades = { high: taker.tradeHigh, low: taker.tradeLow, last: taker.tradeLast };
      for (const stop of book.stops.triggered(trades, MAX_STOP_TRIGGERS - triggered)) {
        // A list's other leg, triggered by the same trades, went with the first (reason oco).
        if (!waiting(s, stop)) continue;
        removeStop(s, stop, outcome.changes);
        s.eventLog.push("order.triggered.v1", {
          ...stopTerms(stop),
          triggerPrice: taker.tradeLastText,
        });
        // A one-cancels-other leg that triggers cancels the other at once.
        breakLink(s, stop, s.eventLog, outcome.changes);
        pending.push(stop);
        triggered++;
      }
    }
    const next = pending.shift();
    if (next === undefined) break;
    executeStop(s, next, command, book, outcome.changes);
  }
  if (triggered === 0) return;
  outcome.result.events = s.eventLog.events.length;
  outcome.result.triggeredStops = triggered;
}

/** A triggered stop trades as the limit or market order it holds would, placed now. */
function executeStop(
  s: EngineState,
  stop: StopNode,
  command: CommandEnvelope,
  book: PairBook,
  changes: BookChange[],
): void {
  const market = stop.type === "stop-market";
  const payload: PlaceOrderPayload = {
    id: stop.id,
    userId: stop.userId,
    side: stop.side,
    type: market ? "market" : "limit",
    pairId: stop.pairId,
    timestamp: stop.timestamp,
    price: stop.priceText,
    volume: stop.volumeText,
    volumeTotal: stop.volumeTotalText,
    quoteVolume: stop.quoteVolumeText,
    priceDecimals: stop.priceDecimals,
    amountDecimals: stop.amountDecimals,
    quoteDecimals: stop.quoteDecimals,
    timeInForce: stop.timeInForce,
    stp: stop.stp,
  };
  const place: PlaceOrderCommand = {
    schemaVersion: 1,
    commandId: command.commandId,
    correlationId: command.correlationId,
    submittedAt: command.submittedAt,
    pairId: stop.pairId,
    partition: command.partition,
    type: "order.place",
    payload,
  };
  match(s, place, parsedOf(stop), book, hashId(stop.id), changes, true);
}

/** The stop's terms as the place path's validator would have parsed them. */
function parsedOf(stop: StopNode): ParsedPlace {
  const parsed = new ParsedPlace();
  parsed.price = stop.price;
  parsed.priceText = stop.priceText;
  parsed.volume = stop.volume;
  parsed.volumeText = stop.volumeText;
  parsed.volumeTotal = stop.volumeTotal;
  parsed.quoteVolume = stop.quoteVolume;
  parsed.quoteSized = stop.quoteSized;
  parsed.timeInForce = stop.timeInForce;
  // A triggered good-till-date stop-limit rests with the deadline it was armed with.
  parsed.expireAt = stop.expireAt;
  parsed.stp = stop.stp;
  return parsed;
}

/** The fields that open both stop events' payloads, in their order. */
export function stopTerms(stop: StopNode) {
  return {
    orderId: stop.id,
    userId: stop.userId,
    pairId: stop.pairId,
    side: stop.side,
    type: stop.type,
    price: stop.priceText,
    stopPrice: stop.stopPriceText,
    volume: stop.volumeText,
    volumeTotal: stop.volumeTotalText,
  };
}
