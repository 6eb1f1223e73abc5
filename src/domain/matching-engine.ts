// The single-threaded matching engine: applies one command at a time to in-memory books and
// returns events, book changes and a result. No I/O, no clock, no randomness.

import {
  addScaled,
  divScaled,
  formatValue,
  mulScaled,
  parseScaledValue,
  pow10Value,
  type Scaled,
  subScaled,
} from "./decimal-scale";
import { addHaltsDigest, addStopsDigest, digestBooks } from "./digest";
import { type CancelReason, EventLog, type EventSource } from "./events";
import { invariant, MatchingInvariantError } from "./invariant-error";
import { LevelDigests } from "./level-digests";
import { type OrderNode, PairBook, type PriceLevel, toRestingOrder } from "./order-book";
import { FINISHED, hashId, OrderIndex } from "./order-index";
import { type ResultCode, ResultCodes, resultCodeName } from "./result-codes";
import { type StopNode, toStopOrder } from "./stop-book";
import { parseStoredStop } from "./stored-stop";
import type {
  AmendOrderCommand,
  BookChange,
  CancelAllCommand,
  CancelOrderCommand,
  CommandEnvelope,
  CommandOutcome,
  CommandResult,
  Depth,
  DepthLevel,
  HaltedPair,
  OrderStatus,
  PairControlCommand,
  PlaceOrderCommand,
  PlaceOrderPayload,
  RestingOrder,
  Side,
  StopKind,
  StopOrder,
  StpMode,
} from "./types";
import { parseAmend } from "./validate-amend";
import { ParsedPlace, PlaceValidator, validDecimals } from "./validate-place";

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
 * The mutable state of the incoming order while it matches. The engine applies one command at a
 * time and nothing keeps a reference to it, so one instance is reset per command.
 */
class Taker {
  id = "";
  /** hashId(id), computed once for the index lookup and reused to rest or finish the order. */
  idHash = 0;
  userId = "";
  side: Side = "bid";
  limit = false;
  price: Scaled = 0;
  priceText = "";
  remaining: Scaled = 0;
  remainingText = "";
  budget: Scaled = 0;
  quoteSized = false;
  executed: Scaled = 0;
  volumeTotal: Scaled = 0;
  volumeTotalText = "";
  accepted: Scaled = 0;
  timestamp = 0;
  /** The taker's trades so far, which the stop trigger check reads once it is done. */
  traded = false;
  tradeHigh: Scaled = 0;
  tradeLow: Scaled = 0;
  tradeLast: Scaled = 0;
  tradeLastText = "";
}

/** Stops one command may trigger, cascades included; the rest stay armed (docs/orders.md). */
export const MAX_STOP_TRIGGERS = 64;
/** Orders one order.cancel-all may cancel; past it the result says cancel-all-partial. */
export const MAX_CANCEL_ALL = 1000;

/** A resting order or a stop of the command's user on the command's pair, or why not. */
type OwnOrder = { node: OrderNode } | { stop: StopNode } | { outcome: CommandOutcome };

export class MatchingEngine {
  private readonly books = new Map<number, PairBook>();
  /** Resting orders and recently finished ids, one lookup for both. */
  private readonly orders: OrderIndex;
  private nextSequence = 1;
  private readonly taker = new Taker();
  private readonly validator = new PlaceValidator();
  /** One log reused by every accepted command; each command still gets its own events array. */
  private readonly log = new EventLog({
    commandId: "",
    correlationId: "",
    partition: 0,
    pairId: 0,
    submittedAt: EPOCH_ISO,
  });
  /** The book of the last command: consecutive commands usually trade the same pair. */
  private lastBook: PairBook | undefined;
  /** Books held when the next new book first sweeps the empty ones (see dropEmptyBooks). */
  private sweepBooksAt = EMPTY_BOOKS_SWEEP_FLOOR;
  /** Keeps the books' digest current as levels change (see LevelDigests). */
  private readonly levelDigests = new LevelDigests();
  /** Stop orders by id; each is also in its pair's stop book. */
  private readonly stops = new Map<string, StopNode>();
  /** Halted pairs and why. */
  private readonly halts = new Map<number, string>();

  constructor({ recentMemory = 100_000 }: MatchingEngineOptions = {}) {
    this.orders = new OrderIndex(recentMemory);
  }

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

  private place(command: PlaceOrderCommand, alreadyAccepted: boolean): CommandOutcome {
    const payload = command.payload;
    // A stored marker already says duplicate: no need to hash the id or look it up.
    const idHash = alreadyAccepted ? 0 : hashId(payload.id);
    if (
      alreadyAccepted ||
      this.orders.get(payload.id, idHash) !== undefined ||
      (this.stops.size > 0 && this.stops.has(payload.id))
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
    if (this.halts.size > 0 && this.halts.has(command.pairId)) {
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
    else this.triggerStops(book, command, outcome);
    return outcome;
  }

  private dropEmptyBook(pairId: number): void {
    const book = this.books.get(pairId);
    if (book === undefined || !book.empty) return;
    this.books.delete(pairId);
    if (this.lastBook === book) this.lastBook = undefined;
  }

  private match(
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
  private sweep(
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
  private fill(
    book: PairBook,
    level: PriceLevel,
    maker: OrderNode,
    taker: Taker,
    amountDecimals: number,
    log: EventLog,
    changes: BookChange[],
  ): boolean {
    const price = maker.price;
    // Quote arithmetic uses the maker's precisions (a pair's orders share them).
    const scaleShift = maker.priceDecimals + maker.amountDecimals;
    let volume: Scaled;
    if (taker.quoteSized) {
      // Round the affordable volume down: price × volume <= budget, and the budget is a whole
      // number of quote units, so the quote rounded up stays within it.
      const affordable = divScaled(
        mulScaled(taker.budget, pow10Value(scaleShift)),
        mulScaled(price, pow10Value(maker.quoteDecimals)),
      );
      // biome-ignore lint/complexity/useMathMinMax: Math.min does not accept bigint Scaled values.
      volume = affordable < maker.remaining ? affordable : maker.remaining;
      if (volume === 0) return true;
    } else {
      // biome-ignore lint/complexity/useMathMinMax: Math.min does not accept bigint Scaled values.
      volume = taker.remaining < maker.remaining ? taker.remaining : maker.remaining;
    }
    // price × volume once: the quote is made from it, and checked against it below.
    const product = mulScaled(price, volume);
    const quote = quoteOf(product, maker.quoteDecimals, scaleShift, maker.side === "ask");
    const makerBefore = maker.remaining;
    const takerBefore = taker.quoteSized ? taker.executed : taker.remaining;
    const makerAfter = subScaled(makerBefore, volume);
    const levelAfter = subScaled(level.total, volume);
    const executedAfter = addScaled(taker.executed, volume);
    const remainingAfter = taker.quoteSized ? taker.remaining : subScaled(taker.remaining, volume);
    const budgetAfter = taker.quoteSized ? subScaled(taker.budget, quote) : taker.budget;
    // Invariants, checked before anything changes so that a violation leaves the book as it was.
    if (
      volume <= 0 ||
      // Nothing goes negative, and a maker never holds more than it was accepted with.
      makerAfter < 0 ||
      makerAfter > maker.accepted ||
      levelAfter < 0 ||
      remainingAfter < 0 ||
      budgetAfter < 0 ||
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
    ) {
      throw new MatchingInvariantError(
        `fill broke conservation: maker ${maker.id} taker ${taker.id} volume ${volume}`,
      );
    }
    maker.remaining = makerAfter;
    level.total = levelAfter;
    if (!taker.traded) {
      taker.traded = true;
      taker.tradeHigh = price;
      taker.tradeLow = price;
    } else if (price > taker.tradeHigh) taker.tradeHigh = price;
    else if (price < taker.tradeLow) taker.tradeLow = price;
    taker.tradeLast = price;
    taker.tradeLastText = maker.priceText;
    book.changed(level);
    taker.executed = executedAfter;
    taker.remaining = remainingAfter;
    taker.budget = budgetAfter;
    // Reuse existing canonical texts when the fill is a whole remaining volume (the common case).
    const volumeText =
      volume === makerBefore
        ? maker.remainingText
        : volume === takerBefore && !taker.quoteSized
          ? taker.remainingText
          : formatValue(volume, amountDecimals);
    const quoteText = formatValue(quote, maker.quoteDecimals);
    const makerDone = maker.remaining === 0;
    maker.remainingText = makerDone ? "0" : formatValue(maker.remaining, maker.amountDecimals);
    if (!taker.quoteSized) {
      taker.remainingText =
        taker.remaining === 0 ? "0" : formatValue(taker.remaining, amountDecimals);
    }
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

  private cancelMakerForStp(
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
  private fokCanFill(book: PairBook, taker: Taker, parsed: ParsedPlace): boolean {
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

  private rest(
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
  private emitRested(node: OrderNode, log: EventLog, changes: BookChange[]): void {
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

  private emitTakerCancel(
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

  private finishTaker(
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
      result: {
        commandId: command.commandId,
        status: "accepted",
        code: ResultCodes.ok,
        codeName: resultCodeName(ResultCodes.ok),
        orderId: payload.id,
        orderStatus: "cancelled",
        executedVolume: executed,
        remainingVolume: remaining,
        events: 1,
      },
      events: log.events,
      changes,
    };
  }

  /**
   * The resting order or stop a cancel or amend names, when it is the user's and on the
   * command's pair; otherwise the reject, as a cancel has always answered it.
   */
  private findOwnOrder(
    command: CommandEnvelope,
    id: string,
    userId: string,
    acceptedBefore: boolean,
  ): OwnOrder {
    const node = this.orders.get(id);
    const stop = this.stops.size > 0 ? this.stops.get(id) : undefined;
    const found =
      node !== undefined && node !== FINISHED && node.pairId === command.pairId
        ? node
        : stop !== undefined && stop.pairId === command.pairId
          ? stop
          : undefined;
    if (found !== undefined) {
      if (found.userId !== userId) {
        return {
          outcome: this.reject(command, ResultCodes.notOwner, "order belongs to another user"),
        };
      }
      return "stopPrice" in found ? { stop: found } : { node: found };
    }
    // Waiting on another pair: unknown on this one, whatever a marker says.
    const elsewhere = (node !== undefined && node !== FINISHED) || stop !== undefined;
    if (!elsewhere && (node === FINISHED || acceptedBefore)) {
      return {
        outcome: this.reject(
          command,
          ResultCodes.orderAlreadyFinished,
          "order already filled or cancelled",
        ),
      };
    }
    return { outcome: this.reject(command, ResultCodes.unknownOrder, "no such resting order") };
  }

  /** Takes a resting order out of the book with its order.cancelled.v1. */
  private cancelResting(
    node: OrderNode,
    reason: CancelReason,
    log: EventLog,
    changes: BookChange[],
  ): { executed: string; remaining: string } {
    const book = this.bookOf(node.pairId)!;
    const state = toRestingOrder(node);
    book.remove(node);
    this.orders.finishResting(node);
    const executed = formatValue(subScaled(node.volumeTotal, node.remaining), node.amountDecimals);
    changes.push({ op: "remove", order: state });
    log.push("order.cancelled.v1", {
      orderId: node.id,
      userId: node.userId,
      pairId: node.pairId,
      side: node.side,
      price: node.priceText,
      volume: state.volume,
      volumeTotal: node.volumeTotalText,
      executedVolume: executed,
      reason,
      code: ResultCodes.ok,
    });
    return { executed, remaining: state.volume };
  }

  /** Takes a stop out of its stop book with its order.cancelled.v1. */
  private cancelStop(
    stop: StopNode,
    reason: CancelReason,
    log: EventLog,
    changes: BookChange[],
  ): { executed: string; remaining: string } {
    this.removeStop(stop, changes);
    this.orders.finish(stop.id);
    const executed = formatValue(subScaled(stop.volumeTotal, stop.volume), stop.amountDecimals);
    log.push("order.cancelled.v1", {
      orderId: stop.id,
      userId: stop.userId,
      pairId: stop.pairId,
      side: stop.side,
      price: stop.priceText,
      volume: stop.volumeText,
      volumeTotal: stop.volumeTotalText,
      executedVolume: executed,
      reason,
      code: ResultCodes.ok,
      quoteVolume: stop.quoteSized ? stop.quoteVolumeText : undefined,
      stopPrice: stop.stopPriceText,
    });
    return { executed, remaining: stop.volumeText };
  }

  private removeStop(stop: StopNode, changes: BookChange[]): void {
    this.bookOf(stop.pairId)!.stops.remove(stop);
    this.stops.delete(stop.id);
    changes.push({ op: "stop-remove", stop: toStopOrder(stop) });
  }

  /** Puts an accepted stop order in its pair's stop book. */
  private acceptStop(
    command: PlaceOrderCommand,
    parsed: ParsedPlace,
    existing: PairBook | undefined,
  ): CommandOutcome {
    const payload = command.payload;
    const book = existing ?? this.createBook(command.pairId);
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
      sequence: this.nextSequence++,
      priceDecimals: payload.priceDecimals,
      amountDecimals: payload.amountDecimals,
      quoteDecimals: payload.quoteDecimals,
    };
    book.stops.insert(stop);
    this.stops.set(stop.id, stop);
    const log = this.log;
    log.reset(command);
    log.push("order.stop-accepted.v1", {
      orderId: stop.id,
      userId: stop.userId,
      pairId: stop.pairId,
      side: stop.side,
      type: stop.type,
      price: stop.priceText,
      stopPrice: stop.stopPriceText,
      volume: stop.volumeText,
      volumeTotal: stop.volumeTotalText,
      quoteVolume: stop.quoteVolumeText,
      timeInForce: stop.timeInForce,
      stp: stop.stp,
      timestamp: stop.timestamp,
    });
    return {
      result: {
        commandId: command.commandId,
        status: "accepted",
        code: ResultCodes.stopAccepted,
        codeName: resultCodeName(ResultCodes.stopAccepted),
        orderId: stop.id,
        orderStatus: "stop-accepted",
        executedVolume: "0",
        remainingVolume: stop.volumeText,
        events: 1,
      },
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
  private triggerStops(book: PairBook, command: CommandEnvelope, outcome: CommandOutcome): void {
    if (book.stops.count === 0 || !this.taker.traded) return;
    const pending: StopNode[] = [];
    let triggered = 0;
    for (;;) {
      const taker = this.taker;
      if (taker.traded && triggered < MAX_STOP_TRIGGERS && !this.halts.has(book.pairId)) {
        const trades = { high: taker.tradeHigh, low: taker.tradeLow, last: taker.tradeLast };
        for (const stop of book.stops.triggered(trades, MAX_STOP_TRIGGERS - triggered)) {
          this.removeStop(stop, outcome.changes);
          this.log.push("order.triggered.v1", {
            orderId: stop.id,
            userId: stop.userId,
            pairId: stop.pairId,
            side: stop.side,
            type: stop.type,
            price: stop.priceText,
            stopPrice: stop.stopPriceText,
            volume: stop.volumeText,
            volumeTotal: stop.volumeTotalText,
            triggerPrice: taker.tradeLastText,
          });
          pending.push(stop);
          triggered++;
        }
      }
      const next = pending.shift();
      if (next === undefined) break;
      this.executeStop(next, command, book, outcome.changes);
    }
    if (triggered === 0) return;
    outcome.result.events = this.log.events.length;
    outcome.result.triggeredStops = triggered;
  }

  /** A triggered stop trades as the limit or market order it holds would, placed now. */
  private executeStop(
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
    const parsed = new ParsedPlace();
    parsed.price = stop.price;
    parsed.priceText = stop.priceText;
    parsed.volume = stop.volume;
    parsed.volumeText = stop.volumeText;
    parsed.volumeTotal = stop.volumeTotal;
    parsed.quoteVolume = stop.quoteVolume;
    parsed.quoteSized = stop.quoteSized;
    parsed.timeInForce = stop.timeInForce;
    parsed.stp = stop.stp;
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
    this.match(place, parsed, book, hashId(stop.id), changes, true);
  }

  private amend(command: AmendOrderCommand, acceptedBefore: boolean): CommandOutcome {
    const payload = command.payload;
    if (payload.pairId !== command.pairId) {
      return this.reject(command, ResultCodes.pairMismatch, "payload pairId differs from envelope");
    }
    if (
      payload.volume === undefined &&
      payload.price === undefined &&
      payload.stopPrice === undefined
    ) {
      return this.reject(
        command,
        ResultCodes.badEnvelope,
        "amend names none of volume, price, stopPrice",
      );
    }
    const found = this.findOwnOrder(command, payload.id, payload.userId, acceptedBefore);
    if ("outcome" in found) return found.outcome;
    if (this.halts.has(command.pairId)) {
      return this.reject(command, ResultCodes.pairHalted, "pair is halted");
    }
    return "stop" in found
      ? this.amendStop(command, found.stop)
      : this.amendResting(command, found.node);
  }

  private amendResting(command: AmendOrderCommand, node: OrderNode): CommandOutcome {
    const parsed = parseAmend(command.payload, node.amountDecimals, node.priceDecimals);
    if ("code" in parsed) return this.reject(command, parsed.code, parsed.reason);
    if (parsed.stopPrice !== undefined) {
      return this.reject(
        command,
        ResultCodes.unsupportedCombination,
        "only stop orders have a stopPrice",
      );
    }
    const executed = subScaled(node.volumeTotal, node.remaining);
    const total = parsed.volume ?? node.volumeTotal;
    const price = parsed.price ?? node.price;
    if (total < executed) {
      return this.reject(
        command,
        ResultCodes.amendBelowExecuted,
        "volume below the executed volume",
      );
    }
    if (total === node.volumeTotal && price === node.price) {
      return amendUnchanged(command, node.id, "rested", node.remainingText);
    }
    const book = this.bookOf(node.pairId)!;
    const keep = price === node.price && total <= node.volumeTotal;
    const best = book.best(node.side === "bid" ? "ask" : "bid");
    const crossing = !keep && best !== undefined && crosses(node.side, price, best.price);
    if (crossing && node.postOnly) {
      return this.reject(command, ResultCodes.postOnlyWouldTake, "post-only order would take");
    }
    const remaining = subScaled(total, executed);
    const after = {
      price: parsed.price === undefined ? node.priceText : formatValue(price, node.priceDecimals),
      volume: formatValue(remaining, node.amountDecimals),
      volumeTotal: formatValue(total, node.amountDecimals),
    };
    const log = this.log;
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
      this.cancelResting(node, "amend", log, changes);
      return this.amendOutcome(command, ResultCodes.ok, "filled", "0", "0", changes);
    }
    if (keep) {
      const level = node.level!;
      level.total = subScaled(level.total, subScaled(node.remaining, remaining));
      book.changed(level);
    } else {
      book.remove(node);
      node.price = price;
      node.priceText = after.price;
      node.accepted = remaining;
      node.sequence = this.nextSequence++;
    }
    node.remaining = remaining;
    node.remainingText = after.volume;
    node.volumeTotal = total;
    node.volumeTotalText = after.volumeTotal;
    if (crossing) return this.rematch(command, node, book, changes);
    if (!keep) book.insert(node);
    changes.push({ op: "put", order: toRestingOrder(node) });
    return this.amendOutcome(command, ResultCodes.ok, "rested", "0", after.volume, changes);
  }

  /**
   * An amended order whose new price crosses the book, out of its book but still indexed,
   * trades as an incoming GTC limit order would; what is left rests again.
   */
  private rematch(
    command: AmendOrderCommand,
    node: OrderNode,
    book: PairBook,
    changes: BookChange[],
  ): CommandOutcome {
    const taker = this.taker;
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
    const log = this.log;
    const stopped = this.sweep(book, taker, node.stp, node.amountDecimals, log, changes);
    const executed = formatValue(taker.executed, node.amountDecimals);
    let outcome: CommandOutcome;
    if (taker.remaining === 0) {
      this.orders.finishResting(node);
      outcome = this.amendOutcome(command, ResultCodes.ok, "filled", executed, "0", changes);
    } else if (stopped) {
      this.emitTakerCancel(log, taker, node, "stp", ResultCodes.stpCancelled);
      this.orders.finishResting(node);
      const code = ResultCodes.stpCancelled;
      outcome = this.amendOutcome(
        command,
        code,
        "cancelled",
        executed,
        taker.remainingText,
        changes,
      );
    } else {
      node.remaining = taker.remaining;
      node.remainingText = taker.remainingText;
      book.insert(node);
      this.emitRested(node, log, changes);
      const status = taker.executed > 0 ? "partially-filled-rested" : "rested";
      outcome = this.amendOutcome(
        command,
        ResultCodes.ok,
        status,
        executed,
        node.remainingText,
        changes,
      );
    }
    this.triggerStops(book, command, outcome);
    return outcome;
  }

  private amendStop(command: AmendOrderCommand, stop: StopNode): CommandOutcome {
    const parsed = parseAmend(command.payload, stop.amountDecimals, stop.priceDecimals);
    if ("code" in parsed) return this.reject(command, parsed.code, parsed.reason);
    const unsupported = (reason: string) =>
      this.reject(command, ResultCodes.unsupportedCombination, reason);
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
      return this.reject(
        command,
        ResultCodes.amendBelowExecuted,
        "volume below the executed volume",
      );
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
    const log = this.log;
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
    if (remaining === 0) {
      stop.priceText = after.price;
      stop.volumeTotalText = after.volumeTotal;
      stop.stopPriceText = after.stopPrice;
      this.cancelStop(stop, "amend", log, changes);
      return this.amendOutcome(command, ResultCodes.ok, "filled", "0", "0", changes);
    }
    const book = this.bookOf(stop.pairId)!;
    if (!keep) book.stops.remove(stop);
    stop.price = price;
    stop.priceText = after.price;
    stop.stopPrice = stopPrice;
    stop.stopPriceText = after.stopPrice;
    stop.volume = remaining;
    stop.volumeText = after.volume;
    stop.volumeTotal = total;
    stop.volumeTotalText = after.volumeTotal;
    if (!keep) {
      stop.sequence = this.nextSequence++;
      book.stops.insert(stop);
    }
    changes.push({ op: "stop-put", stop: toStopOrder(stop) });
    return this.amendOutcome(command, ResultCodes.ok, "stop-accepted", "0", after.volume, changes);
  }

  private amendOutcome(
    command: AmendOrderCommand,
    code: ResultCode,
    orderStatus: OrderStatus,
    executedVolume: string,
    remainingVolume: string,
    changes: BookChange[],
  ): CommandOutcome {
    return {
      result: {
        commandId: command.commandId,
        status: "accepted",
        code,
        codeName: resultCodeName(code),
        orderId: command.payload.id,
        orderStatus,
        executedVolume,
        remainingVolume,
        events: this.log.events.length,
      },
      events: this.log.events,
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
      for (const order of [...book.canonicalOrders(), ...book.stops.byArrival()]) {
        if (order.userId !== userId) continue;
        if (picks.length === MAX_CANCEL_ALL) more = true;
        else picks.push(order);
      }
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
      result: {
        commandId: command.commandId,
        status: "accepted",
        code,
        codeName: resultCodeName(code),
        cancelledOrders: picks.length,
        events: log.events.length,
      },
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
      change = { op: "halt", pairId, reason };
    } else {
      this.halts.delete(pairId);
      change = { op: "resume", pairId };
    }
    log.push(halting ? "pair.halted.v1" : "pair.resumed.v1", { pairId, reason });
    return {
      result: {
        commandId: command.commandId,
        status: "accepted",
        code: ResultCodes.ok,
        codeName: resultCodeName(ResultCodes.ok),
        events: 1,
      },
      events: log.events,
      changes: [change],
    };
  }

  private bookOf(pairId: number): PairBook | undefined {
    const last = this.lastBook;
    if (last !== undefined && last.pairId === pairId) return last;
    const book = this.books.get(pairId);
    if (book !== undefined) this.lastBook = book;
    return book;
  }

  private createBook(pairId: number): PairBook {
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
  private dropEmptyBooks(): void {
    for (const [pairId, book] of this.books) {
      if (book.empty) this.books.delete(pairId);
    }
    if (this.lastBook?.empty) this.lastBook = undefined;
    this.sweepBooksAt = Math.max(EMPTY_BOOKS_SWEEP_FLOOR, 2 * this.books.size);
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
    if (stop.sequence >= this.nextSequence) this.nextSequence = stop.sequence + 1;
  }

  /** Rebuilds a pair's halt from the datastore. */
  loadHalt(pairId: number, reason: string): void {
    if (!Number.isSafeInteger(pairId) || pairId <= 0 || typeof reason !== "string") {
      throw new MatchingInvariantError(`cannot load the halt of pair ${pairId}`);
    }
    this.halts.set(pairId, reason);
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

  getStopOrder(orderId: string): StopOrder | undefined {
    const node = this.stops.get(orderId);
    return node === undefined ? undefined : toStopOrder(node);
  }

  stopOrderCount(pairId?: number): number {
    if (pairId === undefined) return this.stops.size;
    return this.books.get(pairId)?.stops.count ?? 0;
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
    this.halts.clear();
    this.nextSequence = 1;
  }

  private sortedBooks(): PairBook[] {
    return [...this.books.values()].filter((b) => !b.empty).sort((a, b) => a.pairId - b.pairId);
  }
}

/** Books held before empty ones are first swept; a sweep never lowers the bound below it. */
export const EMPTY_BOOKS_SWEEP_FLOOR = 1024;

const stpModes: ReadonlySet<string> = new Set([
  "none",
  "cancel-taker",
  "cancel-maker",
  "cancel-both",
]);

/** An amend to the values the order has: accepted, nothing changes, no events. */
function amendUnchanged(
  command: AmendOrderCommand,
  orderId: string,
  orderStatus: OrderStatus,
  remainingVolume: string,
): CommandOutcome {
  return {
    result: {
      commandId: command.commandId,
      status: "accepted",
      code: ResultCodes.amendUnchanged,
      codeName: resultCodeName(ResultCodes.amendUnchanged),
      orderId,
      orderStatus,
      executedVolume: "0",
      remainingVolume,
      events: 0,
    },
    events: [],
    changes: [],
  };
}

function loadFailure(order: { id: string }, why: string): never {
  throw new MatchingInvariantError(`cannot load order ${order.id}: ${why}`);
}

/** True when a taker on `side` at `price` would trade against a level at `levelPrice`. */
function crosses(side: Side, price: Scaled, levelPrice: Scaled): boolean {
  return side === "bid" ? levelPrice <= price : levelPrice >= price;
}

function executedOf(taker: Taker): Scaled {
  return taker.quoteSized ? taker.executed : subScaled(taker.volumeTotal, taker.remaining);
}

/**
 * `product` (price × volume) × 10^quoteDecimals / 10^scaleShift, rounded to a whole quote unit in the
 * book's favour, without leaving exactness: up when the maker sells (the resting ask is never
 * paid less than its price, and a fill never moves volume for nothing), down when the maker
 * buys (the resting bid never pays more than its price).
 */
function quoteOf(
  product: Scaled,
  quoteDecimals: number,
  scaleShift: number,
  roundUp: boolean,
): Scaled {
  // With more quote decimals than price and amount decimals together the quote is exact.
  if (quoteDecimals >= scaleShift)
    return mulScaled(product, pow10Value(quoteDecimals - scaleShift));
  const unit = pow10Value(scaleShift - quoteDecimals);
  const floor = divScaled(product, unit);
  return roundUp && mulScaled(floor, unit) !== product ? addScaled(floor, 1) : floor;
}

/**
 * True when `quote` (in quote units) is `product`, price × volume in units of 10^-scaleShift, rounded
 * to a whole quote unit by less than one unit: up when the maker sells, down when it buys.
 * Checked the other way round from quoteOf (a multiplication where it divides, a division
 * where it multiplies), so the two cannot share a slip.
 */
function quoteRoundedOnce(
  quote: Scaled,
  product: Scaled,
  quoteDecimals: number,
  scaleShift: number,
  roundUp: boolean,
): boolean {
  // As many quote decimals as price and amount decimals together, or more: the quote is exact,
  // so dividing it back gives the product with nothing left over.
  if (quoteDecimals >= scaleShift) {
    const scale = pow10Value(quoteDecimals - scaleShift);
    const back = divScaled(quote, scale);
    return back === product && mulScaled(back, scale) === quote;
  }
  const unit = pow10Value(scaleShift - quoteDecimals);
  const over = subScaled(mulScaled(quote, unit), product);
  return roundUp ? over >= 0 && over < unit : over <= 0 && over > -unit;
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

export type { EventSource };
