// An accepted order as a taker: loaded into the engine's taker, swept against the book,
// then rested or finished with its events and result. Used by a place and by a triggered
// stop. No I/O, no clock.

import { formatValue, type Scaled, subScaled } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import type { CancelReason, EventLog } from "./events";
import { showNext } from "./iceberg";
import type { OrderNode, PairBook } from "./order-book";
import { emitRested } from "./rested";
import { type ResultCode, ResultCodes, resultCodeName } from "./result-codes";
import { fokCanFill, sweep } from "./sweep";
import type { Taker } from "./taker";
import type {
  BookChange,
  CommandOutcome,
  OrderStatus,
  PlaceOrderCommand,
  PlaceOrderPayload,
} from "./types";
import type { ParsedPlace } from "./validate-place";

/** Loads the engine's taker with an accepted order's terms. */
function loadTaker(taker: Taker, payload: PlaceOrderPayload, parsed: ParsedPlace, idHash: number) {
  const volumeText = parsed.quoteSized ? "0" : parsed.volumeText;
  taker.id = payload.id;
  taker.idHash = idHash;
  taker.userId = payload.userId;
  taker.side = payload.side;
  taker.limit = payload.type === "limit";
  taker.price = parsed.price;
  taker.priceText = parsed.priceText;
  taker.remaining = parsed.quoteSized ? 0 : parsed.volume;
  taker.remainingText = volumeText;
  taker.budget = parsed.quoteVolume;
  taker.quoteSized = parsed.quoteSized;
  taker.executed = 0;
  taker.volumeTotal = parsed.volumeTotal;
  taker.volumeTotalText =
    payload.volumeTotal === payload.volume && !parsed.quoteSized
      ? volumeText
      : formatValue(parsed.volumeTotal, payload.amountDecimals);
  taker.accepted = parsed.volume;
  taker.timestamp = payload.timestamp;
  taker.traded = false;
}

/**
 * Matches an accepted order and rests or finishes it. `continuing`: a triggered stop, whose
 * events follow the command's in the same log.
 */
export function match(
  s: EngineState,
  command: PlaceOrderCommand,
  parsed: ParsedPlace,
  existing: PairBook | undefined,
  idHash: number,
  changes: BookChange[] = [],
  continuing = false,
): CommandOutcome {
  const payload = command.payload;
  const taker = s.taker;
  loadTaker(taker, payload, parsed, idHash);
  const log = s.eventLog;
  if (!continuing) log.reset(command);
  const book = existing ?? s.createBook(command.pairId);

  if (parsed.timeInForce === "fok" && !fokCanFill(book, taker, parsed)) {
    emitTakerCancel(log, taker, payload, "fok", ResultCodes.fokNotFilled);
    return finishTaker(s, command, log, changes, "cancelled", ResultCodes.fokNotFilled);
  }
  const stpStopped = sweep(s, book, taker, parsed.stp, payload.amountDecimals, log, changes);
  const complete = taker.quoteSized ? taker.budget === 0 : taker.remaining === 0;
  if (complete) return finishTaker(s, command, log, changes, "filled", ResultCodes.filled);
  if (stpStopped) {
    emitTakerCancel(log, taker, payload, "stp", ResultCodes.stpCancelled);
    return finishTaker(s, command, log, changes, "cancelled", ResultCodes.stpCancelled);
  }
  if (taker.limit && (parsed.timeInForce === "gtc" || parsed.timeInForce === "gtd")) {
    restTaker(s, command, parsed, book, log, changes);
    const partially = taker.executed > 0;
    const status = partially ? "partially-filled-rested" : "rested";
    const code = partially ? ResultCodes.partiallyFilledRested : ResultCodes.rested;
    return finishTaker(s, command, log, changes, status, code);
  }
  const reason: CancelReason = taker.limit ? "ioc" : "market-remainder";
  emitTakerCancel(log, taker, payload, reason, ResultCodes.remainderCancelled);
  return finishTaker(s, command, log, changes, "cancelled", ResultCodes.remainderCancelled);
}

/** What is left of the taker rests in its book, last in its level's queue. */
function restTaker(
  s: EngineState,
  command: PlaceOrderCommand,
  parsed: ParsedPlace,
  book: PairBook,
  log: EventLog,
  changes: BookChange[],
): void {
  const { payload } = command;
  const taker = s.taker;
  const node: OrderNode = {
    id: taker.id,
    userId: taker.userId,
    pairId: command.pairId,
    side: taker.side,
    price: taker.price,
    priceText: taker.priceText,
    remaining: taker.remaining,
    remainingText: taker.remainingText,
    accepted: taker.accepted,
    volumeTotal: taker.volumeTotal,
    volumeTotalText: taker.volumeTotalText,
    timestamp: taker.timestamp,
    sequence: s.nextSequence++,
    priceDecimals: payload.priceDecimals,
    amountDecimals: payload.amountDecimals,
    quoteDecimals: payload.quoteDecimals,
    stp: parsed.stp,
    postOnly: parsed.postOnly,
    expireAt: parsed.expireAt,
    display: parsed.display,
    hidden: 0,
    listId: "",
    linked: "",
    level: null,
    handle: -1,
    prev: null,
    next: null,
  };
  // An iceberg shows part of what is left; a plain order all of it.
  if (node.display !== 0) showNext(node, taker.remaining);
  book.insert(node);
  s.orders.rest(node, taker.idHash);
  if (node.expireAt !== 0) s.armExpiry(node);
  emitRested(node, log, changes);
}

/** The taker's order.cancelled.v1 for what it leaves unfilled. */
export function emitTakerCancel(
  log: EventLog,
  taker: Taker,
  payload: Pick<PlaceOrderPayload, "pairId" | "amountDecimals" | "quoteDecimals">,
  reason: CancelReason,
  code: ResultCode,
): void {
  const decimals = payload.amountDecimals;
  log.push("order.cancelled.v1", {
    orderId: taker.id,
    userId: taker.userId,
    pairId: payload.pairId,
    side: taker.side,
    price: taker.priceText,
    volume: taker.remainingText,
    volumeTotal: taker.volumeTotalText,
    executedVolume: formatValue(executedOf(taker), decimals),
    reason,
    code,
    quoteVolume: taker.quoteSized ? formatValue(taker.budget, payload.quoteDecimals) : undefined,
  });
}

function finishTaker(
  s: EngineState,
  command: PlaceOrderCommand,
  log: EventLog,
  changes: BookChange[],
  orderStatus: OrderStatus,
  code: ResultCode,
): CommandOutcome {
  const taker = s.taker;
  if (orderStatus === "filled" || orderStatus === "cancelled")
    s.orders.finish(taker.id, taker.idHash);
  const decimals = command.payload.amountDecimals;
  return {
    result: {
      commandId: command.commandId,
      status: "accepted",
      code,
      codeName: resultCodeName(code),
      orderId: taker.id,
      orderStatus,
      executedVolume: formatValue(taker.executed, decimals),
      remainingVolume: taker.remainingText,
      events: log.events.length,
    },
    events: log.events,
    changes,
    acceptedOrderId: taker.id,
  };
}

function executedOf(taker: Taker): Scaled {
  return taker.quoteSized ? taker.executed : subScaled(taker.volumeTotal, taker.remaining);
}
