// A taker against the opposite side of its book: best price first, FIFO within a level, at
// the makers' prices, with self-trade prevention; and the fill-or-kill look ahead that walks
// the same way without changing anything. No I/O, no clock.

import { addScaled, type Scaled } from "./decimal-scale";
import type { EngineState } from "./engine-state";
import type { EventLog } from "./events";
import { fill } from "./fill";
import type { PairBook } from "./order-book";
import { crosses } from "./quote-math";
import { ResultCodes } from "./result-codes";
import type { Taker } from "./taker";
import type { BookChange, StpMode } from "./types";
import type { ParsedPlace } from "./validate-place";
import { cancelResting } from "./withdraw";

/**
 * Matches the taker against the opposite side, best price first and FIFO within a level, at the
 * maker's price. Returns true when self-trade prevention stopped the taker.
 */
export function sweep(
  s: EngineState,
  book: PairBook,
  taker: Taker,
  stp: StpMode,
  amountDecimals: number,
  log: EventLog,
  changes: BookChange[],
): boolean {
  const levels = taker.side === "bid" ? book.asks : book.bids;
  while (levels.length > 0) {
    const level = levels[levels.length - 1]!;
    if (taker.limit && !crosses(taker.side, taker.price, level.price)) return false;
    // The maker is always the level's head: each one before it left the level (filled, or
    // cancelled by self-trade prevention) or went to its back (an iceberg's next part); and
    // the head, read again after each, is right even when a one-cancels-other leg that left
    // took its other leg, further down this level, with it.
    let maker = level.head;
    while (maker !== null) {
      if (stp !== "none" && maker.userId === taker.userId) {
        if (stp !== "cancel-taker") {
          cancelResting(s, maker, "stp", log, changes, ResultCodes.stpCancelled);
        }
        if (stp !== "cancel-maker") return true;
        maker = level.head;
        continue;
      }
      const sequence = maker.sequence;
      const done = fill(s, book, level, maker, taker, amountDecimals, log, changes);
      if (done) return false;
      // A maker left partly filled means the taker can afford no more of it: a quote-sized
      // bid's budget left is below one smallest volume unit at this price (a base-sized
      // taker that fills short of the maker is done), and later makers cost no less. An
      // iceberg that showed its next part (a new sequence, last in the level) was taken whole.
      if (maker.remaining !== 0 && maker.sequence === sequence) return false;
      maker = level.head;
    }
  }
  return false;
}

/**
 * Walks the opposite side without changing it to see whether a fill-or-kill taker can fill
 * completely, applying self-trade prevention the way the sweep would.
 */
export function fokCanFill(book: PairBook, taker: Taker, parsed: ParsedPlace): boolean {
  const levels = taker.side === "bid" ? book.asks : book.bids;
  let available: Scaled = 0;
  // One leg of a one-cancels-other pair counts: filling it cancels the other.
  let legs: Set<string> | undefined;
  for (let i = levels.length - 1; i >= 0; i--) {
    const level = levels[i]!;
    if (taker.limit && !crosses(taker.side, taker.price, level.price)) return false;
    // Icebergs' hidden parts are reached too, but each part shown goes to the level's back:
    // they count once the rest of the level did (an order that stops the taker comes first).
    let hidden: Scaled = 0;
    for (let maker = level.head; maker !== null; maker = maker.next) {
      if (parsed.stp !== "none" && maker.userId === taker.userId) {
        if (parsed.stp === "cancel-maker") continue;
        return false;
      }
      if (maker.linked !== "") {
        legs ??= new Set();
        if (legs.has(maker.linked)) continue;
        legs.add(maker.id);
      }
      available = addScaled(available, maker.remaining);
      if (maker.hidden !== 0) hidden = addScaled(hidden, maker.hidden);
      if (available >= taker.remaining) return true;
    }
    available = addScaled(available, hidden);
    if (available >= taker.remaining) return true;
  }
  return false;
}
