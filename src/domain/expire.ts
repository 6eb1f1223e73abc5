// clock.tick: moves the engine's time forward, takes out the good-till-date orders and stops
// whose deadline it passed and fires the dead-man's switches it passed. No I/O.

import type { EngineState } from "./engine-state";
import type { EventLog } from "./events";
import { executedText, unfilledText } from "./iceberg";
import type { OrderNode } from "./order-book";
import { accepted, reject } from "./outcomes";
import { ResultCodes } from "./result-codes";
import { fireSwitch, sweep } from "./sessions";
import type { StopNode } from "./stop-book";
import type { BookChange, ClockTickCommand, CommandOutcome } from "./types";
import { breakLink, removeStop, stopExecutedText, takeOutResting } from "./withdraw";

/** Orders one tick may expire or cancel; the rest are due at once and go in the next ticks. */
export const MAX_EXPIRIES = 1000;

/**
 * The order of a tick's work: first the sweeps of switches that fired before (their users'
 * orders), then every deadline it passed, earliest first: a switch before an order at the
 * same millisecond, switches by user id, orders in time priority. A switch that fires
 * sweeps at once, as far as the tick's room goes.
 */
export function tick(s: EngineState, command: ClockTickCommand): CommandOutcome {
  const now = command.payload.now;
  if (!Number.isSafeInteger(now) || now < 0) {
    return reject(command, ResultCodes.badEnvelope, "clock.tick: now must be epoch milliseconds");
  }
  // A tick older than the engine's time changes nothing: time never goes back.
  if (now > s.now) s.now = now;
  const log = s.eventLog;
  log.reset(command);
  const changes: BookChange[] = [];
  let done = sweep(s, MAX_EXPIRIES, changes);
  let expired = 0;
  while (done < MAX_EXPIRIES) {
    const order = s.nextOrderExpiry();
    const due = s.nextSwitch();
    if (due !== undefined && due.at <= s.now && (order === undefined || due.at <= order)) {
      fireSwitch(s, due.userId, due.at, changes);
      done += sweep(s, MAX_EXPIRIES - done, changes);
      continue;
    }
    if (order === undefined || order > s.now) break;
    const node = s.armed(s.expiries.pop()!)!;
    if ("stopPrice" in node) expireStop(s, node, log, changes);
    else expireResting(s, node, log, changes);
    done++;
    expired++;
  }
  const result = accepted(command.commandId, ResultCodes.ok, {
    expiredOrders: expired,
    events: log.events.length,
  });
  // Orders and stops of fired switches' users.
  if (done > expired) result.cancelledOrders = done - expired;
  return {
    result,
    events: log.events,
    changes,
  };
}

function expireResting(s: EngineState, node: OrderNode, log: EventLog, changes: BookChange[]) {
  takeOutResting(s, node, changes);
  log.pushOnPair(node.pairId, "order.expired.v1", {
    orderId: node.id,
    userId: node.userId,
    pairId: node.pairId,
    side: node.side,
    price: node.priceText,
    volume: unfilledText(node),
    volumeTotal: node.volumeTotalText,
    executedVolume: executedText(node),
    expireAt: node.expireAt,
  });
  breakLink(s, node, log, changes);
}

function expireStop(s: EngineState, stop: StopNode, log: EventLog, changes: BookChange[]) {
  removeStop(s, stop, changes);
  s.orders.finish(stop.id);
  log.pushOnPair(stop.pairId, "order.expired.v1", {
    orderId: stop.id,
    userId: stop.userId,
    pairId: stop.pairId,
    side: stop.side,
    price: stop.priceText,
    volume: stop.volumeText,
    volumeTotal: stop.volumeTotalText,
    executedVolume: stopExecutedText(stop),
    expireAt: stop.expireAt,
    quoteVolume: stop.quoteSized ? stop.quoteVolumeText : undefined,
    stopPrice: stop.stopPriceText,
  });
  breakLink(s, stop, log, changes);
}
