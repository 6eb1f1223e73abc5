// order.amend: the rules of docs/orders.md for resting orders (priority kept or lost,
// re-matched when a new price crosses) and for stops. No I/O, no clock.

import { amendIceberg } from "./amend-iceberg";
import { findOwnOrder } from "./cancel";
import { formatValue, type Scaled, subScaled } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import { emitTakerCancel } from "./match";
import { type OrderNode, type PairBook, toRestingOrder } from "./order-book";
import { accepted, reject } from "./outcomes";
import { crosses } from "./quote-math";
import { emitRested } from "./rested";
import { type ResultCode, ResultCodes } from "./result-codes";
import { type StopNode, toStopOrder } from "./stop-book";
import { triggerStops } from "./stops";
import { sweep } from "./sweep";
import type { AmendOrderCommand, BookChange, CommandOutcome, OrderStatus } from "./types";
import { parseAmend } from "./validate-amend";
import { breakLink, cancelResting, cancelStop } from "./withdraw";

export function amend(
  s: EngineState,
  command: AmendOrderCommand,
  acceptedBefore: boolean,
): CommandOutcome {
  const payload = command.payload;
  if (payload.pairId !== command.pairId) {
    return reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
  }
  if (
    payload.volume === undefined &&
    payload.price === undefined &&
    payload.stopPrice === undefined
  ) {
    return reject(command, ResultCodes.badEnvelope, "amend names none of volume, price, stopPrice");
  }
  const found = findOwnOrder(s, command, payload.id, payload.userId, acceptedBefore);
  if ("outcome" in found) return found.outcome;
  if (s.halts.has(command.pairId)) {
    return reject(command, ResultCodes.pairHalted, "pair is halted");
  }
  return "stop" in found ? amendStop(s, command, found.stop) : amendResting(s, command, found.node);
}

function amendResting(s: EngineState, command: AmendOrderCommand, node: OrderNode): CommandOutcome {
  const parsed = parseAmend(command.payload, node.amountDecimals, node.priceDecimals);
  if ("code" in parsed) return reject(command, parsed.code, parsed.reason);
  if (parsed.stopPrice !== undefined) {
    return reject(command, ResultCodes.unsupportedCombination, "only stop orders have a stopPrice");
  }
  if (node.display !== 0) return amendIceberg(s, command, node, parsed.price, parsed.volume);
  const executed = subScaled(node.volumeTotal, node.remaining);
  const total = parsed.volume ?? node.volumeTotal;
  const price = parsed.price ?? node.price;
  if (total < executed) {
    return reject(command, ResultCodes.amendBelowExecuted, "volume below the executed volume");
  }
  if (total === node.volumeTotal && price === node.price) {
    return amendUnchanged(command, node.id, "rested", node.remainingText);
  }
  const book = s.bookOf(node.pairId)!;
  const keep = price === node.price && total <= node.volumeTotal;
  const best = book.best(node.side === "bid" ? "ask" : "bid");
  const crossing = !keep && best !== undefined && crosses(node.side, price, best.price);
  if (crossing && node.postOnly) {
    return reject(command, ResultCodes.postOnlyWouldTake, "post-only order would take");
  }
  const remaining = subScaled(total, executed);
  const after = {
    price: parsed.price === undefined ? node.priceText : formatValue(price, node.priceDecimals),
    volume: formatValue(remaining, node.amountDecimals),
    volumeTotal: formatValue(total, node.amountDecimals),
  };
  const log = s.eventLog;
  log.reset(command);
  const changes: BookChange[] = [];
  log.push("order.amended.v1", {
    orderId: node.id,
    userId: node.userId,
    pairId: node.pairId,
    side: node.side,
    type: "limit",
    priorityKept: keep,
    before: {
      price: node.priceText,
      volume: node.remainingText,
      volumeTotal: node.volumeTotalText,
    },
    after,
    executedVolume: formatValue(executed, node.amountDecimals),
  });
  if (remaining === 0) {
    node.priceText = after.price;
    node.volumeTotalText = after.volumeTotal;
    cancelResting(s, node, "amend", log, changes);
    return amendOutcome(s, command, ResultCodes.ok, "filled", "0", "0", changes);
  }
  applyRestingAmend(s, node, book, keep, { price, remaining, total }, after);
  if (crossing) return rematch(s, command, node, book, changes);
  if (!keep) book.insert(node);
  changes.push({ op: "put", order: toRestingOrder(node) });
  return amendOutcome(s, command, ResultCodes.ok, "rested", "0", after.volume, changes);
}

/**
 * An amended order whose new price crosses the book, out of its book but still indexed,
 * trades as an incoming GTC limit order would; what is left rests again.
 */
function rematch(
  s: EngineState,
  command: AmendOrderCommand,
  node: OrderNode,
  book: PairBook,
  changes: BookChange[],
): CommandOutcome {
  const taker = s.taker;
  taker.id = node.id;
  taker.userId = node.userId;
  taker.side = node.side;
  taker.limit = true;
  taker.price = node.price;
  taker.priceText = node.priceText;
  taker.remaining = node.remaining;
  taker.remainingText = node.remainingText;
  taker.budget = 0;
  taker.quoteSized = false;
  taker.executed = 0;
  taker.volumeTotal = node.volumeTotal;
  taker.volumeTotalText = node.volumeTotalText;
  taker.accepted = node.remaining;
  taker.timestamp = node.timestamp;
  taker.traded = false;
  const log = s.eventLog;
  const stopped = sweep(s, book, taker, node.stp, node.amountDecimals, log, changes);
  const executed = formatValue(taker.executed, node.amountDecimals);
  let outcome: CommandOutcome;
  if (taker.remaining === 0 || stopped) {
    // It left the book at the amend: the datastore must drop it too.
    changes.push({ op: "remove", order: toRestingOrder(node) });
  }
  if (taker.remaining === 0) {
    s.orders.finishResting(node);
    outcome = amendOutcome(s, command, ResultCodes.ok, "filled", executed, "0", changes);
  } else if (stopped) {
    emitTakerCancel(log, taker, node, "stp", ResultCodes.stpCancelled);
    s.orders.finishResting(node);
    const code = ResultCodes.stpCancelled;
    outcome = amendOutcome(s, command, code, "cancelled", executed, taker.remainingText, changes);
  } else {
    node.remaining = taker.remaining;
    node.remainingText = taker.remainingText;
    book.insert(node);
    emitRested(node, log, changes);
    const status = taker.executed > 0 ? "partially-filled-rested" : "rested";
    outcome = amendOutcome(
      s,
      command,
      ResultCodes.ok,
      status,
      executed,
      node.remainingText,
      changes,
    );
  }
  // A one-cancels-other leg that traded as it re-matched cancels the other, as a fill does.
  // So does one that left the book without a trade (self-trade prevention stopped it).
  if ((taker.traded || stopped || taker.remaining === 0) && node.linked !== "") {
    breakLink(s, node, log, outcome.changes);
    outcome.result.events = log.events.length;
  }
  triggerStops(s, book, command, outcome);
  return outcome;
}

function amendStop(s: EngineState, command: AmendOrderCommand, stop: StopNode): CommandOutcome {
  const parsed = parseAmend(command.payload, stop.amountDecimals, stop.priceDecimals);
  if ("code" in parsed) return reject(command, parsed.code, parsed.reason);
  const unsupported = (reason: string) =>
    reject(command, ResultCodes.unsupportedCombination, reason);
  if (parsed.price !== undefined && stop.type === "stop-market") {
    return unsupported("a stop-market order has no price");
  }
  if (parsed.volume !== undefined && stop.quoteSized) {
    return unsupported("a quote-sized order has no volume to amend");
  }
  const executed = subScaled(stop.volumeTotal, stop.volume);
  const total = parsed.volume ?? stop.volumeTotal;
  const price = parsed.price ?? stop.price;
  const stopPrice = parsed.stopPrice ?? stop.stopPrice;
  if (total < executed) {
    return reject(command, ResultCodes.amendBelowExecuted, "volume below the executed volume");
  }
  if (total === stop.volumeTotal && price === stop.price && stopPrice === stop.stopPrice) {
    return amendUnchanged(command, stop.id, "stop-accepted", stop.volumeText);
  }
  const keep = price === stop.price && stopPrice === stop.stopPrice && total <= stop.volumeTotal;
  const remaining = subScaled(total, executed);
  const after = {
    price: parsed.price === undefined ? stop.priceText : formatValue(price, stop.priceDecimals),
    volume: formatValue(remaining, stop.amountDecimals),
    volumeTotal: formatValue(total, stop.amountDecimals),
    stopPrice:
      parsed.stopPrice === undefined
        ? stop.stopPriceText
        : formatValue(stopPrice, stop.priceDecimals),
  };
  const log = s.eventLog;
  log.reset(command);
  const changes: BookChange[] = [];
  log.push("order.amended.v1", {
    orderId: stop.id,
    userId: stop.userId,
    pairId: stop.pairId,
    side: stop.side,
    type: stop.type,
    priorityKept: keep,
    before: {
      price: stop.priceText,
      volume: stop.volumeText,
      volumeTotal: stop.volumeTotalText,
      stopPrice: stop.stopPriceText,
    },
    after,
    executedVolume: formatValue(executed, stop.amountDecimals),
  });
  // A quote-sized stop has no volume to finish: its budget stays as it is.
  if (remaining === 0 && !stop.quoteSized) {
    stop.priceText = after.price;
    stop.volumeTotalText = after.volumeTotal;
    stop.stopPriceText = after.stopPrice;
    cancelStop(s, stop, "amend", log, changes);
    return amendOutcome(s, command, ResultCodes.ok, "filled", "0", "0", changes);
  }
  applyStopAmend(s, stop, keep, { price, stopPrice, remaining, total }, after);
  changes.push({ op: "stop-put", stop: toStopOrder(stop) });
  return amendOutcome(s, command, ResultCodes.ok, "stop-accepted", "0", after.volume, changes);
}

/**
 * The amended figures onto a resting order: in place when it keeps its priority (its level's
 * total shrinks), else out of its book with a new price and sequence (reinserted or
 * rematched by the caller).
 */
function applyRestingAmend(
  s: EngineState,
  node: OrderNode,
  book: PairBook,
  keep: boolean,
  to: { price: Scaled; remaining: Scaled; total: Scaled },
  after: { price: string; volume: string; volumeTotal: string },
): void {
  if (keep) {
    const level = node.level!;
    level.total = subScaled(level.total, subScaled(node.remaining, to.remaining));
    book.changed(level);
  } else {
    book.remove(node);
    node.price = to.price;
    node.priceText = after.price;
    node.accepted = to.remaining;
    node.sequence = s.nextSequence++;
    s.armExpiry(node);
  }
  node.remaining = to.remaining;
  node.remainingText = after.volume;
  node.volumeTotal = to.total;
  node.volumeTotalText = after.volumeTotal;
}

/** The amended figures onto a stop; one that loses its priority is queued again, last. */
function applyStopAmend(
  s: EngineState,
  stop: StopNode,
  keep: boolean,
  to: { price: Scaled; stopPrice: Scaled; remaining: Scaled; total: Scaled },
  after: { price: string; volume: string; volumeTotal: string; stopPrice: string },
): void {
  const book = s.bookOf(stop.pairId)!;
  if (!keep) book.stops.remove(stop);
  stop.price = to.price;
  stop.priceText = after.price;
  stop.stopPrice = to.stopPrice;
  stop.stopPriceText = after.stopPrice;
  stop.volume = to.remaining;
  stop.volumeText = after.volume;
  stop.volumeTotal = to.total;
  stop.volumeTotalText = after.volumeTotal;
  if (!keep) {
    stop.sequence = s.nextSequence++;
    book.stops.insert(stop);
    s.armExpiry(stop);
  }
}

function amendOutcome(
  s: EngineState,
  command: AmendOrderCommand,
  code: ResultCode,
  orderStatus: OrderStatus,
  executedVolume: string,
  remainingVolume: string,
  changes: BookChange[],
): CommandOutcome {
  return {
    result: accepted(command.commandId, code, {
      orderId: command.payload.id,
      orderStatus,
      executedVolume,
      remainingVolume,
      events: s.eventLog.events.length,
    }),
    events: s.eventLog.events,
    changes,
  };
}

/** An amend to the values the order has: accepted, nothing changes, no events. */
function amendUnchanged(
  command: AmendOrderCommand,
  orderId: string,
  orderStatus: OrderStatus,
  remainingVolume: string,
): CommandOutcome {
  return {
    result: accepted(command.commandId, ResultCodes.amendUnchanged, {
      orderId,
      orderStatus,
      executedVolume: "0",
      remainingVolume,
      events: 0,
    }),
    events: [],
    changes: [],
  };
}
