// The single-threaded matching engine: applies one command at a time to in-memory books and
// returns events, book changes and a result. No I/O, no clock, no randomness.

import { addScaled, formatValue, parseScaledValue, type Scaled } from "./decimal-scale";
import { addHaltsDigest, addStopsDigest, digestBooks } from "./digest";
import { EngineAmend } from "./engine-amend";
import { accepted, EMPTY_BOOKS_SWEEP_FLOOR } from "./engine-core";
import type { EventSource } from "./events";
import { invariant, MatchingInvariantError } from "./invariant-error";
import { type OrderNode, type PairBook, type PriceLevel, toRestingOrder } from "./order-book";
import { FINISHED } from "./order-index";
import { ResultCodes } from "./result-codes";
import { type StopNode, toStopOrder } from "./stop-book";
import { parseStoredStop } from "./stored-stop";
import type {
  BookChange,
  CancelAllCommand,
  CancelOrderCommand,
  CommandEnvelope,
  CommandOutcome,
  Depth,
  DepthLevel,
  HaltedPair,
  PairControlCommand,
  RestingOrder,
  StopDepthLevel,
  StopOrder,
} from "./types";
import { validDecimals } from "./validate-place";

export {
  EMPTY_BOOKS_SWEEP_FLOOR,
  type MatchingEngineOptions,
  type RejectTarget,
} from "./engine-core";
export { MAX_STOP_TRIGGERS } from "./engine-stops";

/** Orders one order.cancel-all may cancel; past it the result says cancel-all-partial. */
export const MAX_CANCEL_ALL = 1000;

export class MatchingEngine extends EngineAmend {
  /**
   * `alreadyAccepted`: the shell's stored marker says an order with the command's order id was
   * accepted before (beyond what this engine remembers): a place of it is a duplicate, and a
   * cancel of it, unless it rests, finds it finished rather than unknown.
   */
  apply(command: CommandEnvelope, alreadyAccepted = false): CommandOutcome {
    if (command.type === "order.place") return this.place(command, alreadyAccepted);
    if (command.type === "order.cancel") return this.cancel(command, alreadyAccepted);
    if (command.type === "order.amend") return this.amend(command, alreadyAccepted);
    if (command.type === "order.cancel-all") return this.cancelAll(command);
    if (command.type === "pair.halt" || command.type === "pair.resume") {
      return this.pairControl(command);
    }
    const unknown = command as { type?: unknown };
    return this.reject(
      command,
      ResultCodes.unknownCommandType,
      `unknown command type ${String(unknown.type)}`,
    );
  }

  private cancel(command: CancelOrderCommand, acceptedBefore: boolean): CommandOutcome {
    const payload = command.payload;
    if (payload.pairId !== command.pairId) {
      return this.reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
    }
    const found = this.findOwnOrder(command, payload.id, payload.userId, acceptedBefore);
    if ("outcome" in found) return found.outcome;
    const log = this.log;
    log.reset(command);
    const changes: BookChange[] = [];
    const { executed, remaining } =
      "stop" in found
        ? this.cancelStop(found.stop, "user", log, changes)
        : this.cancelResting(found.node, "user", log, changes);
    return {
      result: accepted(command.commandId, ResultCodes.ok, {
        orderId: payload.id,
        orderStatus: "cancelled",
        executedVolume: executed,
        remainingVolume: remaining,
        events: 1,
      }),
      events: log.events,
      changes,
    };
  }

  /**
   * Cancels the user's resting orders and stops, pairs ascending, each pair's book in
   * canonical order and then its stops by arrival, at most MAX_CANCEL_ALL of them.
   */
  private cancelAll(command: CancelAllCommand): CommandOutcome {
    const { userId, pairId } = command.payload;
    if (pairId !== undefined && pairId !== command.pairId) {
      return this.reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
    }
    const books =
      pairId === undefined
        ? this.sortedBooks()
        : [this.books.get(pairId)].filter((b) => b !== undefined);
    const picks: (OrderNode | StopNode)[] = [];
    let more = false;
    for (const book of books) {
      more = pickUsersOrders(book, userId, picks);
      if (more) break;
    }
    const log = this.log;
    log.reset(command);
    const changes: BookChange[] = [];
    for (const pick of picks) {
      if ("stopPrice" in pick) this.cancelStop(pick, "cancel-all", log, changes);
      else this.cancelResting(pick, "cancel-all", log, changes);
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

  private pairControl(command: PairControlCommand): CommandOutcome {
    const { pairId, reason } = command.payload;
    if (pairId !== command.pairId) {
      return this.reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
    }
    const halting = command.type === "pair.halt";
    const halted = this.halts.has(pairId);
    if (halting && halted) {
      return this.reject(command, ResultCodes.pairAlreadyHalted, "pair is halted already");
    }
    if (!halting && !halted) {
      return this.reject(command, ResultCodes.pairNotHalted, "pair is not halted");
    }
    const log = this.log;
    log.reset(command);
    let change: BookChange;
    if (halting) {
      this.halts.set(pairId, reason);
      this.recountExtras();
      change = { op: "halt", pairId, reason };
    } else {
      this.halts.delete(pairId);
      this.recountExtras();
      change = { op: "resume", pairId };
    }
    log.push(halting ? "pair.halted.v1" : "pair.resumed.v1", { pairId, reason });
    return {
      result: accepted(command.commandId, ResultCodes.ok, {
        events: 1,
      }),
      events: log.events,
      changes: [change],
    };
  }

  /** Books held, empty ones included (see dropEmptyBooks). */
  bookCount(): number {
    return this.books.size;
  }

  /** Rebuilds state from the datastore; the next sequence stays above every loaded one. */
  loadRestingOrder(order: RestingOrder): void {
    const known = this.orders.get(order.id);
    if (known !== undefined && known !== FINISHED) loadFailure(order, "duplicate id");
    // The same bounds a placed order passed: a stored order outside them was never accepted,
    // and would make every later order of its pair a precision mismatch.
    // No arrays or closures here: a book load calls this once per resting order, and the
    // garbage of a million calls grew the process's RSS by ~120 MiB (the bench's --resting).
    if (!validDecimals(order.priceDecimals)) loadFailure(order, "bad priceDecimals (0..18)");
    if (!validDecimals(order.amountDecimals)) loadFailure(order, "bad amountDecimals (0..18)");
    if (!validDecimals(order.quoteDecimals)) loadFailure(order, "bad quoteDecimals (0..18)");
    if (!Number.isSafeInteger(order.pairId) || order.pairId <= 0) loadFailure(order, "bad pairId");
    if (!Number.isSafeInteger(order.timestamp) || order.timestamp < 0)
      loadFailure(order, "bad timestamp");
    const price = parseScaledValue(order.price, order.priceDecimals);
    const remaining = parseScaledValue(order.volume, order.amountDecimals);
    const volumeTotal = parseScaledValue(order.volumeTotal, order.amountDecimals);
    if (typeof price === "object" || price <= 0) loadFailure(order, "bad price");
    if (typeof remaining === "object" || remaining <= 0) loadFailure(order, "bad volume");
    if (typeof volumeTotal === "object") loadFailure(order, "bad volumeTotal");
    if (!Number.isSafeInteger(order.sequence) || order.sequence < 0)
      loadFailure(order, "bad sequence");
    if (order.side !== "bid" && order.side !== "ask") loadFailure(order, "bad side");
    if (!stpModes.has(order.stp)) loadFailure(order, "bad stp mode");
    if (remaining > volumeTotal) loadFailure(order, "volume above volumeTotal");
    const book = this.books.get(order.pairId) ?? this.createBook(order.pairId);
    if (book.precisionDiffers(order.priceDecimals, order.amountDecimals, order.quoteDecimals)) {
      loadFailure(order, "precisions differ from the pair's other orders");
    }
    const node: OrderNode = {
      id: order.id,
      userId: order.userId,
      pairId: order.pairId,
      side: order.side,
      price,
      priceText: formatValue(price, order.priceDecimals),
      remaining,
      remainingText: formatValue(remaining, order.amountDecimals),
      accepted: remaining,
      volumeTotal,
      volumeTotalText: formatValue(volumeTotal, order.amountDecimals),
      timestamp: order.timestamp,
      sequence: order.sequence,
      priceDecimals: order.priceDecimals,
      amountDecimals: order.amountDecimals,
      quoteDecimals: order.quoteDecimals,
      stp: order.stp,
      postOnly: order.postOnly === true,
      level: null,
      handle: -1,
      prev: null,
      next: null,
    };
    book.insertBySequence(node);
    this.orders.rest(node);
    if (order.sequence >= this.nextSequence) this.nextSequence = order.sequence + 1;
  }

  /** Rebuilds a stop order from the datastore; the next sequence stays above it. */
  loadStopOrder(stop: StopOrder): void {
    const known = this.orders.get(stop.id);
    if ((known !== undefined && known !== FINISHED) || this.stops.has(stop.id)) {
      loadFailure(stop, "duplicate id");
    }
    const node = parseStoredStop(stop);
    const book = this.books.get(stop.pairId) ?? this.createBook(stop.pairId);
    if (book.precisionDiffers(stop.priceDecimals, stop.amountDecimals, stop.quoteDecimals)) {
      loadFailure(stop, "precisions differ from the pair's other orders");
    }
    book.stops.insert(node);
    this.stops.set(node.id, node);
    this.recountExtras();
    if (stop.sequence >= this.nextSequence) this.nextSequence = stop.sequence + 1;
  }

  /** Rebuilds a pair's halt from the datastore. */
  loadHalt(pairId: number, reason: string): void {
    if (!Number.isSafeInteger(pairId) || pairId <= 0 || typeof reason !== "string") {
      throw new MatchingInvariantError(`cannot load the halt of pair ${pairId}`);
    }
    this.halts.set(pairId, reason);
    this.recountExtras();
  }

  /** Every stop order: pairs ascending, arrival order within a pair. */
  *stopOrders(): Generator<StopOrder> {
    if (this.stops.size === 0) return;
    for (const book of this.sortedBooks()) {
      for (const node of book.stops.byArrival()) yield toStopOrder(node);
    }
  }

  /** One pair's stop orders in arrival order. */
  stopOrdersOf(pairId: number): StopOrder[] {
    return this.books.get(pairId)?.stops.byArrival().map(toStopOrder) ?? [];
  }

  /**
   * A pair's stops by stop price, nearest to triggering first (buy stops ascending, sell stops
   * descending: each side's own order), at most `levels` a side. Reads only those levels.
   */
  stopDepth(pairId: number, levels: number): StopDepthLevel[] {
    const out: StopDepthLevel[] = [];
    const book = this.books.get(pairId);
    if (book === undefined) return out;
    for (const list of [book.stops.bids, book.stops.asks]) {
      for (let i = 0, count = 0; i < list.length && count < levels; count++) {
        const first = list[i]!;
        let volume: Scaled = 0;
        let quote: Scaled = 0;
        let orders = 0;
        for (; i < list.length && list[i]!.stopPrice === first.stopPrice; i++, orders++) {
          volume = addScaled(volume, list[i]!.volume);
          quote = addScaled(quote, list[i]!.quoteVolume);
        }
        out.push({
          side: first.side,
          stopPrice: first.stopPriceText,
          volume: formatValue(volume, first.amountDecimals),
          quoteVolume: formatValue(quote, first.quoteDecimals),
          orders,
        });
      }
    }
    return out;
  }

  getStopOrder(orderId: string): StopOrder | undefined {
    const node = this.stops.get(orderId);
    return node === undefined ? undefined : toStopOrder(node);
  }

  stopOrderCount(pairId?: number): number {
    if (pairId === undefined) return this.stops.size;
    return this.books.get(pairId)?.stops.size ?? 0;
  }

  /** Halted pairs, ascending. */
  haltedPairs(): HaltedPair[] {
    return [...this.halts]
      .sort((a, b) => a[0] - b[0])
      .map(([pairId, reason]) => ({ pairId, reason }));
  }

  /** Every resting order, in canonical order (pairs ascending, bids then asks, best first, FIFO). */
  *restingOrders(): Generator<RestingOrder> {
    for (const book of this.sortedBooks()) {
      for (const node of book.canonicalOrders()) yield toRestingOrder(node);
    }
  }

  restingOrderCount(pairId?: number): number {
    if (pairId === undefined) return this.orders.resting;
    return this.books.get(pairId)?.orderCount ?? 0;
  }

  getOrder(orderId: string): RestingOrder | undefined {
    const node = this.orders.get(orderId);
    return node === undefined || node === FINISHED ? undefined : toRestingOrder(node);
  }

  /** Aggregated top `levels` price levels per side, best first. */
  depth(pairId: number, levels: number): Depth {
    const book = this.books.get(pairId);
    const side = (list: PriceLevel[] | undefined, decimals: number): DepthLevel[] => {
      const out: DepthLevel[] = [];
      if (list === undefined) return out;
      for (let i = list.length - 1; i >= 0 && out.length < levels; i--) {
        const level = list[i]!;
        out.push({
          price: level.priceText,
          volume: formatValue(level.total, decimals),
          orders: level.count,
        });
      }
      return out;
    };
    const decimals = book?.amountDecimals ?? 0;
    return { bids: side(book?.bids, decimals), asks: side(book?.asks, decimals) };
  }

  /** Validates every book and the id index; throws MatchingInvariantError on the first fault. */
  check(): void {
    let total = 0;
    for (const book of this.books.values()) total += book.check();
    const indexed = this.orders.resting;
    invariant(total === indexed, () => `index holds ${indexed}, books ${total}`);
    let seen = 0;
    for (const [id, node] of this.orders.restingNodes()) {
      seen++;
      invariant(node.id === id && node.level !== null, () => `index entry ${id} not resting`);
      invariant(this.books.get(node.pairId) !== undefined, () => `order ${id} has no book`);
    }
    invariant(seen === indexed, () => `index counts ${indexed} resting orders, holds ${seen}`);
    let stops = 0;
    for (const book of this.books.values()) {
      stops += book.stops.check(book.pairId);
      for (const stop of [...book.stops.bids, ...book.stops.asks]) {
        invariant(this.stops.get(stop.id) === stop, () => `stop ${stop.id} is not indexed`);
        invariant(this.orders.get(stop.id) === undefined, () => `stop ${stop.id} is an order too`);
      }
    }
    invariant(stops === this.stops.size, () => `${this.stops.size} stops indexed, ${stops} held`);
    const extras = this.stops.size + this.halts.size;
    invariant(this.extras === extras, () => `extras counts ${this.extras}, holds ${extras}`);
    // Equal counts are not enough: every order in a book must be the very node its id finds,
    // or a cancel would unlink a stale node and leave the real one resting.
    for (const book of this.books.values()) {
      for (const node of book.canonicalOrders()) {
        invariant(
          this.orders.get(node.id) === node,
          () => `order ${node.id} in the book is not the one its id finds`,
        );
      }
    }
  }

  /**
   * The digest kept level by level must be the one hashed afresh: a change that marked no level
   * would leave it stale. Apart from check(), which the conductor runs at every load: this
   * hashes every order twice.
   */
  checkDigest(): void {
    const kept = this.digest();
    const fresh = digestBooks(this.restingOrders(), this.stopOrders(), this.haltedPairs());
    invariant(kept === fresh, () => `kept digest ${kept}, books hash to ${fresh}`);
  }

  /**
   * Canonical digest of all books, independent of absolute sequence numbers: the sum of each
   * price level's FNV-1a 64 hash (see digestOrders). Kept current level by level, so it costs
   * the levels changed since it was last asked for.
   */
  digest(): string {
    while (!this.levelDigests.step(Number.POSITIVE_INFINITY));
    if (this.stops.size === 0 && this.halts.size === 0) return this.levelDigests.hex();
    // Stops and halts are few: hashed afresh each time, onto the levels' sum.
    const sum = this.levelDigests.copySum();
    addStopsDigest(sum, this.stopOrders());
    addHaltsDigest(sum, this.haltedPairs());
    return sum.hex();
  }

  /**
   * One bounded step towards a current digest: hashes changed levels until about `maxOrders`
   * orders were hashed. True once digest() would answer at once. For a caller that yields
   * between steps, so that a deep book never holds up matching.
   */
  digestStep(maxOrders: number): boolean {
    return this.levelDigests.step(maxOrders);
  }

  clear(): void {
    this.books.clear();
    this.levelDigests.reset();
    this.lastBook = undefined;
    this.sweepBooksAt = EMPTY_BOOKS_SWEEP_FLOOR;
    this.orders.clear();
    this.stops.clear();
    this.recountExtras();
    this.halts.clear();
    this.recountExtras();
    this.nextSequence = 1;
  }
}

const stpModes: ReadonlySet<string> = new Set([
  "none",
  "cancel-taker",
  "cancel-maker",
  "cancel-both",
]);

function loadFailure(order: { id: string }, why: string): never {
  throw new MatchingInvariantError(`cannot load order ${order.id}: ${why}`);
}

/**
 * Adds the user's resting orders of `book` (canonical order), then its stops (arrival
 * order), to `picks`, up to MAX_CANCEL_ALL; true when more were left. The levels' lists are
 * walked in place: a mass cancel reads the whole book, and copying it first cost the exchange
 * bench most of its rate.
 */
function pickUsersOrders(book: PairBook, userId: string, picks: (OrderNode | StopNode)[]): boolean {
  for (const levels of [book.bids, book.asks]) {
    for (let i = levels.length - 1; i >= 0; i--) {
      for (let node = levels[i]!.head; node !== null; node = node.next) {
        if (node.userId !== userId) continue;
        if (picks.length === MAX_CANCEL_ALL) return true;
        picks.push(node);
      }
    }
  }
  if (book.stops.size === 0) return false;
  for (const stop of book.stops.byArrival()) {
    if (stop.userId !== userId) continue;
    if (picks.length === MAX_CANCEL_ALL) return true;
    picks.push(stop);
  }
  return false;
}

export type { EventSource };
