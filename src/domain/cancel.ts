// order.cancel and order.cancel-all, and finding the order or stop a cancel or amend names.
// No I/O, no clock.

import type { EngineState } from "./engine-state";
import type { OrderNode, PairBook } from "./order-book";
import { FINISHED } from "./order-index";
import { accepted, reject } from "./outcomes";
import { ResultCodes } from "./result-codes";
import type { StopNode } from "./stop-book";
import type {
  BookChange,
  CancelAllCommand,
  CancelOrderCommand,
  CommandEnvelope,
  CommandOutcome,
} from "./types";
import { cancelResting, cancelStop, waiting } from "./withdraw";

/** Orders one order.cancel-all may cancel; past it the result says cancel-all-partial. */
export const MAX_CANCEL_ALL = 1000;

/** A resting order or a stop of the command's user on the command's pair, or why not. */
export type OwnOrder = { node: OrderNode } | { stop: StopNode } | { outcome: CommandOutcome };

/**
 * The resting order or stop a cancel or amend names, when it is the user's and on the
 * command's pair; otherwise the reject, as a cancel has always answered it.
 */
export function findOwnOrder(
  s: EngineState,
  command: CommandEnvelope,
  id: string,
  userId: string,
  acceptedBefore: boolean,
): OwnOrder {
  const node = s.orders.get(id);
  const stop = s.extras !== 0 ? s.stops.get(id) : undefined;
  const found =
    node !== undefined && node !== FINISHED && node.pairId === command.pairId
      ? node
      : stop !== undefined && stop.pairId === command.pairId
        ? stop
        : undefined;
  if (found !== undefined) {
    if (found.userId !== userId) {
      return { outcome: reject(command, ResultCodes.notOwner, "order belongs to another user") };
    }
    return "stopPrice" in found ? { stop: found } : { node: found };
  }
  // Waiting on another pair: unknown on this one, whatever a marker says.
  const elsewhere = (node !== undefined && node !== FINISHED) || stop !== undefined;
  if (!elsewhere && (node === FINISHED || acceptedBefore)) {
    return {
      outcome: reject(
        command,
        ResultCodes.orderAlreadyFinished,
        "order already filled or cancelled",
      ),
    };
  }
  return { outcome: reject(command, ResultCodes.unknownOrder, "no such resting order") };
}

export function cancel(
  s: EngineState,
  command: CancelOrderCommand,
  acceptedBefore: boolean,
): CommandOutcome {
  const payload = command.payload;
  if (payload.pairId !== command.pairId) {
    return reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
  }
  const found = findOwnOrder(s, command, payload.id, payload.userId, acceptedBefore);
  if ("outcome" in found) return found.outcome;
  const log = s.eventLog;
  log.reset(command);
  const changes: BookChange[] = [];
  const { executed, remaining } =
    "stop" in found
      ? cancelStop(s, found.stop, "user", log, changes)
      : cancelResting(s, found.node, "user", log, changes);
  return {
    result: accepted(command.commandId, ResultCodes.ok, {
      orderId: payload.id,
      orderStatus: "cancelled",
      executedVolume: executed,
      remainingVolume: remaining,
      // Two when the order was a list's leg: the other goes with it.
      events: log.events.length,
    }),
    events: log.events,
    changes,
  };
}

/**
 * Cancels the user's resting orders and stops, pairs ascending, each pair's book in
 * canonical order and then its stops by arrival, at most MAX_CANCEL_ALL of them.
 */
export function cancelAll(s: EngineState, command: CancelAllCommand): CommandOutcome {
  const { userId, pairId } = command.payload;
  if (pairId !== undefined && pairId !== command.pairId) {
    return reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
  }
  const books =
    pairId === undefined ? s.sortedBooks() : [s.books.get(pairId)].filter((b) => b !== undefined);
  const picks: (OrderNode | StopNode)[] = [];
  let more = false;
  for (const book of books) {
    more = pickUsersOrders(book, userId, picks, MAX_CANCEL_ALL);
    if (more) break;
  }
  const log = s.eventLog;
  log.reset(command);
  const changes: BookChange[] = [];
  for (const pick of picks) {
    // A list's other leg went with the first (reason oco): counted, not cancelled twice.
    if (!waiting(s, pick)) continue;
    if ("stopPrice" in pick) cancelStop(s, pick, "cancel-all", log, changes);
    else cancelResting(s, pick, "cancel-all", log, changes);
  }
  const code = more ? ResultCodes.cancelAllPartial : ResultCodes.ok;
  return {
    result: accepted(command.commandId, code, {
      cancelledOrders: picks.length,
      events: log.events.length,
    }),
    events: log.events,
    changes,
  };
}

/**
 * Adds the user's resting orders of `book` (canonical order), then its stops (arrival
 * order), to `picks`, until it holds `limit`; true when more were left. The levels' lists are
 * walked in place: a mass cancel reads the whole book, and copying it first cost the exchange
 * bench most of its rate.
 */
export function pickUsersOrders(
  book: PairBook,
  userId: string,
  picks: (OrderNode | StopNode)[],
  limit: number,
): boolean {
  for (const levels of [book.bids, book.asks]) {
    for (let i = levels.length - 1; i >= 0; i--) {
      for (let node = levels[i]!.head; node !== null; node = node.next) {
        if (node.userId !== userId) continue;
        if (picks.length >= limit) return true;
        picks.push(node);
      }
    }
  }
  if (book.stops.size === 0) return false;
  for (const stop of book.stops.byArrival()) {
    if (stop.userId !== userId) continue;
    if (picks.length >= limit) return true;
    picks.push(stop);
  }
  return false;
}
