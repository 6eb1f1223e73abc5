// The engine's state and its hot path: placing an order, matching it against the book at the
// makers' prices (FIFO within a level) and resting or finishing it. No I/O, no clock.

import { addScaled, formatValue, type Scaled, subScaled } from "./decimal-scale";
import { type CancelReason, EventLog } from "./events";
import { applyFill, planFill } from "./fill";
import { LevelDigests } from "./level-digests";
import { type OrderNode, PairBook, type PriceLevel, toRestingOrder } from "./order-book";
import { hashId, OrderIndex } from "./order-index";
import { crosses } from "./quote-math";
import { type ResultCode, ResultCodes, resultCodeName } from "./result-codes";
import type { StopNode } from "./stop-book";
import { Taker } from "./taker";
import type {
  BookChange,
  CommandEnvelope,
  CommandOutcome,
  CommandResult,
  OrderStatus,
  PlaceOrderCommand,
  PlaceOrderPayload,
  Side,
  StpMode,
} from "./types";
import { type ParsedPlace, PlaceValidator } from "./validate-place";

export interface MatchingEngineOptions {
  /** Bound on remembered accepted / finished order ids (duplicate and cancel detection). */
  recentMemory?: number;
}

/** What is known about a command the shell or decodeCommand refused; every field is optional. */
export interface RejectTarget {
  commandId?: string;
  correlationId?: string;
  pairId?: number;
  partition?: number;
  submittedAt?: string;
  orderId?: string;
  userId?: string;
  type?: string;
}

/** Stand-ins for a refused command that lacks the field: documented, stable, never a clock. */
const UNKNOWN_COMMAND_ID = "unidentified";
const EPOCH_ISO = "1970-01-01T00:00:00.000Z";

/**
 * The books, the id index and the place path. The layers above add stop orders
 * (engine-stops.ts), amends (engine-amend.ts) and the remaining commands and queries
 * (matching-engine.ts); they share this state, hence protected rather than private.
 */
export abstract class EngineCore {
  protected readonly books = new Map<number, PairBook>();

  /** Resting orders and recently finished ids, one lookup for both. */
  protected readonly orders: OrderIndex;

  protected nextSequence = 1;

  protected readonly taker = new Taker();

  protected readonly validator = new PlaceValidator();

  /** One log reused by every accepted command; each command still gets its own events array. */
  protected readonly log = new EventLog({
    commandId: "",
    correlationId: "",
    partition: 0,
    pairId: 0,
    submittedAt: EPOCH_ISO,
  });

  /** The book of the last command: consecutive commands usually trade the same pair. */
  protected lastBook: PairBook | undefined;

  /** Books held when the next new book first sweeps the empty ones (see dropEmptyBooks). */
  protected sweepBooksAt = EMPTY_BOOKS_SWEEP_FLOOR;

  /** Keeps the books' digest current as levels change (see LevelDigests). */
  protected readonly levelDigests = new LevelDigests();

  /** Stop orders by id; each is also in its pair's stop book. */
  protected readonly stops = new Map<string, StopNode>();

  /** Halted pairs and why. */
  protected readonly halts = new Map<number, string>();
  /**
   * Stops plus halted pairs, kept as a plain number: every place reads it, and a Map's size
   * getter there cost a measurable share of the alternating bench. Call recountExtras after
   * changing either.
   */
  protected extras = 0;

  protected recountExtras(): void {
    this.extras = this.stops.size + this.halts.size;
  }

  constructor({ recentMemory = 100_000 }: MatchingEngineOptions = {}) {
    this.orders = new OrderIndex(recentMemory);
  }

  /** Builds the order.rejected.v1 outcome for a command refused before or by the engine. */
  reject(target: CommandEnvelope | RejectTarget, code: ResultCode, reason: string): CommandOutcome {
    const info = rejectInfo(target);
    const log = new EventLog({
      commandId: info.commandId ?? UNKNOWN_COMMAND_ID,
      correlationId: info.correlationId ?? "",
      partition: info.partition ?? 0,
      pairId: info.pairId ?? 0,
      submittedAt: info.submittedAt ?? EPOCH_ISO,
    });
    const codeName = resultCodeName(code);
    log.push("order.rejected.v1", {
      orderId: info.orderId,
      userId: info.userId,
      pairId: info.pairId,
      commandType: info.type,
      code,
      codeName,
      reason,
    });
    const result: CommandResult = {
      commandId: info.commandId ?? UNKNOWN_COMMAND_ID,
      status: "rejected",
      code,
      codeName,
      reason,
      orderStatus: "rejected",
      events: 1,
    };
    if (info.orderId !== undefined) result.orderId = info.orderId;
    return { result, events: log.events, changes: [] };
  }

  protected place(command: PlaceOrderCommand, alreadyAccepted: boolean): CommandOutcome {
    const payload = command.payload;
    // A stored marker already says duplicate: no need to hash the id or look it up.
    const idHash = alreadyAccepted ? 0 : hashId(payload.id);
    if (
      alreadyAccepted ||
      this.orders.get(payload.id, idHash) !== undefined ||
      (this.extras !== 0 && this.stops.has(payload.id))
    ) {
      return {
        result: {
          commandId: command.commandId,
          status: "duplicate",
          code: ResultCodes.duplicateOrder,
          codeName: "duplicate-order",
          orderId: payload.id,
          events: 0,
        },
        events: [],
        changes: [],
      };
    }
    const parsed = this.validator.validate(payload, command.pairId);
    if ("code" in parsed) return this.reject(command, parsed.code, parsed.reason);
    if (this.extras !== 0 && this.halts.has(command.pairId)) {
      return this.reject(command, ResultCodes.pairHalted, "pair is halted");
    }
    const book = this.bookOf(command.pairId);
    if (
      book?.precisionDiffers(payload.priceDecimals, payload.amountDecimals, payload.quoteDecimals)
    ) {
      return this.reject(
        command,
        ResultCodes.pairPrecisionMismatch,
        "order precisions differ from the resting orders of this pair",
      );
    }
    if (parsed.stop) return this.acceptStop(command, parsed, book);
    const opposite: Side = payload.side === "bid" ? "ask" : "bid";
    if (parsed.postOnly && book !== undefined) {
      const best = book.best(opposite);
      if (best !== undefined && crosses(payload.side, parsed.price, best.price)) {
        return this.reject(command, ResultCodes.postOnlyWouldTake, "post-only order would take");
      }
    }
    const outcome = this.match(command, parsed, book, idHash);
    // A taker on a pair with no book that left nothing resting (a market, IOC or FOK order)
    // leaves no empty book behind: one per pair id ever named would grow without bound.
    if (book === undefined) this.dropEmptyBook(command.pairId);
    else if (book.stops.size !== 0 && this.taker.traded) this.triggerStops(book, command, outcome);
    return outcome;
  }

  protected dropEmptyBook(pairId: number): void {
    const book = this.books.get(pairId);
    if (book === undefined || !book.empty) return;
    this.books.delete(pairId);
    if (this.lastBook === book) this.lastBook = undefined;
  }

  protected match(
    command: PlaceOrderCommand,
    parsed: ParsedPlace,
    existing: PairBook | undefined,
    idHash: number,
    changes: BookChange[] = [],
    /** A triggered stop: its events follow the command's, in the same log. */
    continuing = false,
  ): CommandOutcome {
    const payload = command.payload;
    const limit = payload.type === "limit";
    const decimals = payload.amountDecimals;
    const volumeText = parsed.quoteSized ? "0" : parsed.volumeText;
    const taker = this.taker;
    taker.id = payload.id;
    taker.idHash = idHash;
    taker.userId = payload.userId;
    taker.side = payload.side;
    taker.limit = limit;
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
        : formatValue(parsed.volumeTotal, decimals);
    taker.accepted = parsed.volume;
    taker.timestamp = payload.timestamp;
    taker.traded = false;
    const log = this.log;
    if (!continuing) log.reset(command);
    const book = existing ?? this.createBook(command.pairId);

    if (parsed.timeInForce === "fok" && !this.fokCanFill(book, taker, parsed)) {
      this.emitTakerCancel(log, taker, payload, "fok", ResultCodes.fokNotFilled);
      return this.finishTaker(command, taker, log, changes, "cancelled", ResultCodes.fokNotFilled);
    }

    const stpStopped = this.sweep(book, taker, parsed.stp, payload.amountDecimals, log, changes);
    const complete = taker.quoteSized ? taker.budget === 0 : taker.remaining === 0;
    if (complete) {
      return this.finishTaker(command, taker, log, changes, "filled", ResultCodes.filled);
    }
    if (stpStopped) {
      this.emitTakerCancel(log, taker, payload, "stp", ResultCodes.stpCancelled);
      return this.finishTaker(command, taker, log, changes, "cancelled", ResultCodes.stpCancelled);
    }
    if (limit && parsed.timeInForce === "gtc")
      return this.rest(command, taker, parsed, book, log, changes);
    const reason: CancelReason = limit ? "ioc" : "market-remainder";
    this.emitTakerCancel(log, taker, payload, reason, ResultCodes.remainderCancelled);
    return this.finishTaker(
      command,
      taker,
      log,
      changes,
      "cancelled",
      ResultCodes.remainderCancelled,
    );
  }

  /**
   * Matches the taker against the opposite side, best price first and FIFO within a level, at the
   * maker's price. Returns true when self-trade prevention stopped the taker.
   */
  protected sweep(
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
      let maker = level.head;
      while (maker !== null) {
        const next = maker.next;
        if (stp !== "none" && maker.userId === taker.userId) {
          if (stp !== "cancel-taker") this.cancelMakerForStp(book, maker, log, changes);
          if (stp !== "cancel-maker") return true;
          maker = next;
          continue;
        }
        const done = this.fill(book, level, maker, taker, amountDecimals, log, changes);
        if (done) return false;
        // A maker left partly filled means the taker can afford no more of it: a quote-sized
        // bid's budget left is below one smallest volume unit at this price (a base-sized
        // taker that fills short of the maker is done), and later makers cost no less.
        if (maker.remaining !== 0) return false;
        maker = next;
      }
    }
    return false;
  }

  /** Executes one fill; returns true when the taker can take no more. */
  protected fill(
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
    return this.emitFill(book, maker, taker, volumeText, quoteText, log, changes);
  }

  /** The fill's book change and events; returns true when the taker can take no more. */
  private emitFill(
    book: PairBook,
    maker: OrderNode,
    taker: Taker,
    volumeText: string,
    quoteText: string,
    log: EventLog,
    changes: BookChange[],
  ): boolean {
    const makerDone = maker.remaining === 0;
    const makerState = toRestingOrder(maker);
    if (makerDone) {
      book.remove(maker);
      this.orders.finishResting(maker);
      changes.push({ op: "remove", order: makerState });
    } else {
      changes.push({ op: "put", order: makerState });
    }
    log.push(makerDone ? "order.filled.v1" : "order.updated.v1", {
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
    });
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
    return takerDone;
  }

  protected cancelMakerForStp(
    book: PairBook,
    maker: OrderNode,
    log: EventLog,
    changes: BookChange[],
  ): void {
    const state = toRestingOrder(maker);
    book.remove(maker);
    this.orders.finishResting(maker);
    changes.push({ op: "remove", order: state });
    log.push("order.cancelled.v1", {
      orderId: maker.id,
      userId: maker.userId,
      pairId: maker.pairId,
      side: maker.side,
      price: maker.priceText,
      volume: state.volume,
      volumeTotal: maker.volumeTotalText,
      executedVolume: formatValue(
        subScaled(maker.volumeTotal, maker.remaining),
        maker.amountDecimals,
      ),
      reason: "stp",
      code: ResultCodes.stpCancelled,
    });
  }

  /**
   * Walks the opposite side without changing it to see whether a fill-or-kill taker can fill
   * completely, applying self-trade prevention the way the sweep would.
   */
  protected fokCanFill(book: PairBook, taker: Taker, parsed: ParsedPlace): boolean {
    const levels = taker.side === "bid" ? book.asks : book.bids;
    let available: Scaled = 0;
    for (let i = levels.length - 1; i >= 0; i--) {
      const level = levels[i]!;
      if (taker.limit && !crosses(taker.side, taker.price, level.price)) return false;
      for (let maker = level.head; maker !== null; maker = maker.next) {
        if (parsed.stp !== "none" && maker.userId === taker.userId) {
          if (parsed.stp === "cancel-maker") continue;
          return false;
        }
        available = addScaled(available, maker.remaining);
        if (available >= taker.remaining) return true;
      }
    }
    return false;
  }

  protected rest(
    command: PlaceOrderCommand,
    taker: Taker,
    parsed: ParsedPlace,
    book: PairBook,
    log: EventLog,
    changes: BookChange[],
  ): CommandOutcome {
    const payload = command.payload;
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
      sequence: this.nextSequence++,
      priceDecimals: payload.priceDecimals,
      amountDecimals: payload.amountDecimals,
      quoteDecimals: payload.quoteDecimals,
      stp: parsed.stp,
      postOnly: parsed.postOnly,
      level: null,
      handle: -1,
      prev: null,
      next: null,
    };
    book.insert(node);
    this.orders.rest(node, taker.idHash);
    this.emitRested(node, log, changes);
    const partially = taker.executed > 0;
    return this.finishTaker(
      command,
      taker,
      log,
      changes,
      partially ? "partially-filled-rested" : "rested",
      partially ? ResultCodes.partiallyFilledRested : ResultCodes.rested,
    );
  }

  /** A resting order's put and its order.rested.v1. */
  protected emitRested(node: OrderNode, log: EventLog, changes: BookChange[]): void {
    const state = toRestingOrder(node);
    changes.push({ op: "put", order: state });
    log.push("order.rested.v1", {
      orderId: node.id,
      userId: node.userId,
      pairId: node.pairId,
      side: node.side,
      price: node.priceText,
      volume: state.volume,
      volumeTotal: node.volumeTotalText,
      executedVolume: formatValue(subScaled(node.volumeTotal, node.remaining), node.amountDecimals),
      timestamp: node.timestamp,
      stp: node.stp,
    });
  }

  protected emitTakerCancel(
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

  protected finishTaker(
    command: PlaceOrderCommand,
    taker: Taker,
    log: EventLog,
    changes: BookChange[],
    orderStatus: OrderStatus,
    code: ResultCode,
  ): CommandOutcome {
    if (orderStatus === "filled" || orderStatus === "cancelled")
      this.orders.finish(taker.id, taker.idHash);
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

  protected bookOf(pairId: number): PairBook | undefined {
    const last = this.lastBook;
    if (last !== undefined && last.pairId === pairId) return last;
    const book = this.books.get(pairId);
    if (book !== undefined) this.lastBook = book;
    return book;
  }

  protected createBook(pairId: number): PairBook {
    if (this.books.size >= this.sweepBooksAt) this.dropEmptyBooks();
    const book = new PairBook(pairId, this.levelDigests);
    this.books.set(pairId, book);
    this.lastBook = book;
    return book;
  }

  /**
   * Drops every book whose last order left. They are kept until then because a pair that
   * empties usually refills at once (the alternating workload empties its book every second
   * command), but pairs that come and go would otherwise leave one empty book each for ever.
   * The next sweep waits until the books have doubled, so sweeping costs O(1) per book made,
   * and the engine never holds more than max(EMPTY_BOOKS_SWEEP_FLOOR, 2 x the non-empty
   * books at the last sweep) books. A dropped book forgets nothing that matters: precisions
   * are compared only with resting orders.
   */
  protected dropEmptyBooks(): void {
    for (const [pairId, book] of this.books) {
      if (book.empty) this.books.delete(pairId);
    }
    if (this.lastBook?.empty) this.lastBook = undefined;
    this.sweepBooksAt = Math.max(EMPTY_BOOKS_SWEEP_FLOOR, 2 * this.books.size);
  }

  protected sortedBooks(): PairBook[] {
    return [...this.books.values()].filter((b) => !b.empty).sort((a, b) => a.pairId - b.pairId);
  }

  /** Puts an accepted stop order in its pair's stop book (engine-stops.ts). */
  protected abstract acceptStop(
    command: PlaceOrderCommand,
    parsed: ParsedPlace,
    existing: PairBook | undefined,
  ): CommandOutcome;

  /** Triggers and executes the stops a taker's trades reach (engine-stops.ts). */
  protected abstract triggerStops(
    book: PairBook,
    command: CommandEnvelope,
    outcome: CommandOutcome,
  ): void;
}

/** Books held before empty ones are first swept; a sweep never lowers the bound below it. */
export const EMPTY_BOOKS_SWEEP_FLOOR = 1024;

function executedOf(taker: Taker): Scaled {
  return taker.quoteSized ? taker.executed : subScaled(taker.volumeTotal, taker.remaining);
}

function rejectInfo(target: CommandEnvelope | RejectTarget): RejectTarget {
  if (!("payload" in target)) return target;
  // An envelope of an unknown type reaches here undecoded: its payload may be anything.
  const payload: { id?: unknown; userId?: unknown } =
    typeof target.payload === "object" && target.payload !== null
      ? (target.payload as { id?: unknown; userId?: unknown })
      : {};
  return {
    commandId: target.commandId,
    correlationId: target.correlationId,
    pairId: target.pairId,
    partition: target.partition,
    submittedAt: target.submittedAt,
    orderId: typeof payload.id === "string" ? payload.id : undefined,
    userId: typeof payload.userId === "string" ? payload.userId : undefined,
    type: target.type,
  };
}

/**
 * The result of an accepted command: its id, code and code name, then `fields` in their
 * order (a result's bytes are stored and replied, so the order is part of them). Not for
 * the place path, which builds its result in place.
 */
export function accepted(
  commandId: string,
  code: ResultCode,
  fields: Omit<CommandResult, "commandId" | "status" | "code" | "codeName">,
): CommandResult {
  return { commandId, status: "accepted", code, codeName: resultCodeName(code), ...fields };
}
