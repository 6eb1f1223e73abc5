// One fill of a taker against a maker, in the steps every fill takes: compute its figures,
// check them against the invariants before anything changes, apply them, then emit the book
// change and the events. No I/O, no clock.

import {
  addScaled,
  divScaled,
  formatValue,
  mulScaled,
  pow10Value,
  type Scaled,
  subScaled,
} from "./decimal-scale";
import type { EngineState } from "./engine-state";
import type { EventLog, OrderFillPayload } from "./events";
import { MatchingInvariantError } from "./invariant-error";
import { type OrderNode, type PairBook, type PriceLevel, toRestingOrder } from "./order-book";
import { quoteOf, quoteRoundedOnce } from "./quote-math";
import { refresh } from "./rested";
import type { Taker } from "./taker";
import type { BookChange, RestingOrder } from "./types";
import { breakLink } from "./withdraw";

/** A fill's figures: what it trades and what each side holds after it. */
export interface FillPlan {
  volume: Scaled;
  quote: Scaled;
  makerBefore: Scaled;
  takerBefore: Scaled;
  makerAfter: Scaled;
  levelAfter: Scaled;
  executedAfter: Scaled;
  remainingAfter: Scaled;
  budgetAfter: Scaled;
}

/**
 * The volume the taker takes of the maker: all it can, and for a quote-sized taker all its
 * budget affords, rounded down (price × volume <= budget, and the budget is a whole number of
 * quote units, so the quote rounded up stays within it).
 */
function fillVolume(maker: OrderNode, taker: Taker, scaleShift: number): Scaled {
  const cap = taker.quoteSized
    ? divScaled(
        mulScaled(taker.budget, pow10Value(scaleShift)),
        mulScaled(maker.price, pow10Value(maker.quoteDecimals)),
      )
    : taker.remaining;
  // biome-ignore lint/complexity/useMathMinMax: Math.min does not accept bigint Scaled values.
  return cap < maker.remaining ? cap : maker.remaining;
}

/**
 * The one plan every fill writes: a fill is planned, checked and applied before the next is
 * planned, and an object allocated per fill cost the alternating domain bench about a tenth of
 * its rate (five interleaved runs each).
 */
const scratch: FillPlan = {
  volume: 0,
  quote: 0,
  makerBefore: 0,
  takerBefore: 0,
  makerAfter: 0,
  levelAfter: 0,
  executedAfter: 0,
  remainingAfter: 0,
  budgetAfter: 0,
};

/**
 * The fill's figures, or undefined when a quote-sized taker's budget affords nothing here.
 * The plan returned is overwritten by the next call.
 * Throws MatchingInvariantError when they would break conservation: checked before anything
 * changes, so a violation leaves the book as it was.
 */
export function planFill(level: PriceLevel, maker: OrderNode, taker: Taker): FillPlan | undefined {
  // Quote arithmetic uses the maker's precisions (a pair's orders share them).
  const scaleShift = maker.priceDecimals + maker.amountDecimals;
  const volume = fillVolume(maker, taker, scaleShift);
  if (taker.quoteSized && volume === 0) return undefined;
  // price × volume once: the quote is made from it, and checked against it below.
  const product = mulScaled(maker.price, volume);
  const quote = quoteOf(product, maker.quoteDecimals, scaleShift, maker.side === "ask");
  const plan = scratch;
  plan.volume = volume;
  plan.quote = quote;
  plan.makerBefore = maker.remaining;
  plan.takerBefore = taker.quoteSized ? taker.executed : taker.remaining;
  plan.makerAfter = subScaled(maker.remaining, volume);
  plan.levelAfter = subScaled(level.total, volume);
  plan.executedAfter = addScaled(taker.executed, volume);
  plan.remainingAfter = taker.quoteSized ? taker.remaining : subScaled(taker.remaining, volume);
  plan.budgetAfter = taker.quoteSized ? subScaled(taker.budget, quote) : taker.budget;
  if (!conserves(plan, maker, taker, product, scaleShift)) {
    throw new MatchingInvariantError(
      `fill broke conservation: maker ${maker.id} taker ${taker.id} volume ${volume}`,
    );
  }
  return plan;
}

/** The invariants every fill keeps. */
function conserves(
  plan: FillPlan,
  maker: OrderNode,
  taker: Taker,
  product: Scaled,
  scaleShift: number,
): boolean {
  const { volume, quote, makerAfter, levelAfter, executedAfter, remainingAfter } = plan;
  return !(
    volume <= 0 ||
    // Nothing goes negative, and a maker never holds more than it was accepted with.
    makerAfter < 0 ||
    makerAfter > maker.accepted ||
    levelAfter < 0 ||
    remainingAfter < 0 ||
    plan.budgetAfter < 0 ||
    // The taker never fills beyond its accepted volume; a quote-sized bid takes asks, whose
    // quotes round up, so it never trades for nothing.
    (!taker.quoteSized && executedAfter > taker.accepted) ||
    (taker.quoteSized && quote <= 0) ||
    // A base-sized taker's executed and remaining volumes are kept apart, across fills and
    // whatever else touches them: together they still make up its accepted volume.
    (!taker.quoteSized && addScaled(executedAfter, remainingAfter) !== taker.accepted) ||
    // The quote, cross-checked by multiplication rather than the division that made it: the
    // exact price × volume, rounded by less than one quote unit, in the book's favour.
    !quoteRoundedOnce(quote, product, maker.quoteDecimals, scaleShift, maker.side === "ask")
  );
}

/** Applies a checked plan to the maker, its level and the taker, canonical texts included. */
export function applyFill(
  book: PairBook,
  level: PriceLevel,
  maker: OrderNode,
  taker: Taker,
  plan: FillPlan,
  amountDecimals: number,
): void {
  const price = maker.price;
  maker.remaining = plan.makerAfter;
  level.total = plan.levelAfter;
  if (!taker.traded) {
    taker.traded = true;
    taker.tradeHigh = price;
    taker.tradeLow = price;
  } else if (price > taker.tradeHigh) taker.tradeHigh = price;
  else if (price < taker.tradeLow) taker.tradeLow = price;
  taker.tradeLast = price;
  taker.tradeLastText = maker.priceText;
  book.changed(level);
  taker.executed = plan.executedAfter;
  taker.remaining = plan.remainingAfter;
  taker.budget = plan.budgetAfter;
  maker.remainingText =
    maker.remaining === 0 ? "0" : formatValue(maker.remaining, maker.amountDecimals);
  if (!taker.quoteSized) {
    taker.remainingText =
      taker.remaining === 0 ? "0" : formatValue(taker.remaining, amountDecimals);
  }
}

/**
 * Executes one fill: plan (compute and check), apply, emit. True when the taker can take no
 * more.
 */
export function fill(
  s: EngineState,
  book: PairBook,
  level: PriceLevel,
  maker: OrderNode,
  taker: Taker,
  amountDecimals: number,
  log: EventLog,
  changes: BookChange[],
): boolean {
  const plan = planFill(level, maker, taker);
  if (plan === undefined) return true;
  // Reuse existing canonical texts when the fill is a whole remaining volume (the common
  // case): read before applyFill rewrites them.
  const volumeText =
    plan.volume === plan.makerBefore
      ? maker.remainingText
      : plan.volume === plan.takerBefore && !taker.quoteSized
        ? taker.remainingText
        : formatValue(plan.volume, amountDecimals);
  const quoteText = formatValue(plan.quote, maker.quoteDecimals);
  applyFill(book, level, maker, taker, plan, amountDecimals);
  return emitFill(s, book, maker, taker, volumeText, quoteText, log, changes);
}

/** The maker's order.filled.v1 or order.updated.v1 payload. */
function makerFillPayload(
  maker: OrderNode,
  makerState: RestingOrder,
  volumeText: string,
  quoteText: string,
): OrderFillPayload {
  const payload: OrderFillPayload = {
    orderId: maker.id,
    userId: maker.userId,
    pairId: maker.pairId,
    side: maker.side,
    role: "maker",
    price: maker.priceText,
    volume: makerState.volume,
    volumeTotal: maker.volumeTotalText,
    fillPrice: maker.priceText,
    fillVolume: volumeText,
    fillQuoteVolume: quoteText,
  };
  // Only an iceberg's: a plain maker's payload keeps its one shape (see emitRested).
  if (maker.display !== 0) payload.hiddenVolume = makerState.hiddenVolume;
  return payload;
}

/**
 * The fill's book change and events; true when the taker can take no more. Positional
 * arguments: an object per fill would be garbage on the hottest path (see scratch above).
 */
function emitFill(
  s: EngineState,
  book: PairBook,
  maker: OrderNode,
  taker: Taker,
  volumeText: string,
  quoteText: string,
  log: EventLog,
  changes: BookChange[],
): boolean {
  // An iceberg whose shown part filled shows its next part (below): updated, not filled.
  const refreshes = maker.remaining === 0 && maker.hidden !== 0;
  const makerDone = maker.remaining === 0 && !refreshes;
  const makerState = toRestingOrder(maker);
  if (makerDone) {
    book.remove(maker);
    s.orders.finishResting(maker);
    changes.push({ op: "remove", order: makerState });
  } else if (!refreshes) {
    changes.push({ op: "put", order: makerState });
  }
  log.push(
    makerDone ? "order.filled.v1" : "order.updated.v1",
    makerFillPayload(maker, makerState, volumeText, quoteText),
  );
  const takerDone = taker.quoteSized ? taker.budget === 0 : taker.remaining === 0;
  if (takerDone) {
    log.push("order.filled.v1", {
      orderId: taker.id,
      userId: taker.userId,
      pairId: maker.pairId,
      side: taker.side,
      role: "taker",
      price: taker.priceText,
      volume: "0",
      volumeTotal: taker.volumeTotalText,
      fillPrice: maker.priceText,
      fillVolume: volumeText,
      fillQuoteVolume: quoteText,
      quoteVolume: taker.quoteSized ? "0" : undefined,
    });
  }
  log.push("deal.executed.v1", {
    pairId: maker.pairId,
    price: maker.priceText,
    volume: volumeText,
    quoteVolume: quoteText,
    makerOrderId: maker.id,
    makerUserId: maker.userId,
    makerSide: maker.side,
    takerOrderId: taker.id,
    takerUserId: taker.userId,
    takerSide: taker.side,
    timestamp: taker.timestamp,
  });
  if (refreshes) refresh(s, book, maker, log, changes);
  // A one-cancels-other leg that fills, even partly, cancels the other.
  if (maker.linked !== "") breakLink(s, maker, log, changes);
  return takerDone;
}
