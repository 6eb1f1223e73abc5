// order.place: a duplicate, a refusal or an accepted order, which becomes a stop in its stop
// book or a taker that matches, rests or finishes, then triggers the stops its trades reach.
// No I/O, no clock.

import type { EngineState } from "./engine-state";
import { match } from "./match";
import type { PairBook } from "./order-book";
import { hashId } from "./order-index";
import { reject } from "./outcomes";
import { crosses } from "./quote-math";
import { ResultCodes } from "./result-codes";
import { acceptStop, triggerStops } from "./stops";
import type { CommandOutcome, PlaceOrderCommand, PlaceOrderPayload } from "./types";
import type { ParsedPlace, PlaceReject } from "./validate-place";

/**
 * `alreadyAccepted`: the shell's stored marker says an order with this id was accepted before,
 * beyond what the engine remembers.
 */
export function place(
  s: EngineState,
  command: PlaceOrderCommand,
  alreadyAccepted: boolean,
): CommandOutcome {
  const payload = command.payload;
  // A stored marker already says duplicate: no need to hash the id or look it up.
  const idHash = alreadyAccepted ? 0 : hashId(payload.id);
  if (
    alreadyAccepted ||
    s.orders.get(payload.id, idHash) !== undefined ||
    (s.extras !== 0 && s.stops.has(payload.id))
  ) {
    return duplicate(command);
  }
  const parsed = s.validator.validate(payload, command.pairId);
  if ("code" in parsed) return reject(command, parsed.code, parsed.reason);
  // By timeInForce, not expireAt: an expireAt of 0 is a deadline too (always past).
  if (parsed.timeInForce === "gtd") {
    const refused = expiryRefusal(s, parsed.expireAt);
    if (refused !== undefined) return reject(command, refused.code, refused.reason);
  }
  const book = s.bookOf(command.pairId);
  const refused = bookRefusal(s, payload, parsed, book);
  if (refused !== undefined) return reject(command, refused.code, refused.reason);
  if (parsed.stop) return acceptStop(s, command, parsed, book);
  const outcome = match(s, command, parsed, book, idHash);
  // A taker on a pair with no book that left nothing resting (a market, IOC or FOK order)
  // leaves no empty book behind: one per pair id ever named would grow without bound.
  if (book === undefined) s.dropEmptyBook(command.pairId);
  else if (book.stops.size !== 0 && s.taker.traded) triggerStops(s, book, command, outcome);
  return outcome;
}

/**
 * Why the book refuses a valid order, in the order the checks run: a halted pair, precisions
 * that differ from its resting orders', a post-only order that would take; undefined: none.
 */
export function bookRefusal(
  s: EngineState,
  payload: PlaceOrderPayload,
  parsed: ParsedPlace,
  book: PairBook | undefined,
): PlaceReject | undefined {
  if (s.extras !== 0 && s.halts.has(payload.pairId)) {
    return { code: ResultCodes.pairHalted, reason: "pair is halted" };
  }
  if (
    book?.precisionDiffers(payload.priceDecimals, payload.amountDecimals, payload.quoteDecimals)
  ) {
    return {
      code: ResultCodes.pairPrecisionMismatch,
      reason: "order precisions differ from the resting orders of this pair",
    };
  }
  if (parsed.postOnly && book !== undefined) {
    const best = book.best(payload.side === "bid" ? "ask" : "bid");
    if (best !== undefined && crosses(payload.side, parsed.price, best.price)) {
      return { code: ResultCodes.postOnlyWouldTake, reason: "post-only order would take" };
    }
  }
  return undefined;
}

/** The furthest ahead of the engine's time a good-till-date order may expire: 90 days. */
export const MAX_EXPIRY_AHEAD_MS = 90 * 24 * 3600 * 1000;

/** Why an expireAt cannot be armed at the engine's time; undefined: it can. */
export function expiryRefusal(s: EngineState, expireAt: number): PlaceReject | undefined {
  if (expireAt <= s.now) {
    return { code: ResultCodes.expiryInPast, reason: `expireAt ${expireAt} is not after ${s.now}` };
  }
  if (expireAt > s.now + MAX_EXPIRY_AHEAD_MS) {
    return {
      code: ResultCodes.expiryTooFar,
      reason: `expireAt ${expireAt} is more than 90 days after ${s.now}`,
    };
  }
  return undefined;
}

function duplicate(command: PlaceOrderCommand): CommandOutcome {
  return {
    result: {
      commandId: command.commandId,
      status: "duplicate",
      code: ResultCodes.duplicateOrder,
      codeName: "duplicate-order",
      orderId: command.payload.id,
      events: 0,
    },
    events: [],
    changes: [],
  };
}
