// Stop orders in the engine: accepting them, triggering them from a taker's trades and
// executing them as the orders they hold, cascades bounded; cancels of orders and stops.

import { formatValue, subScaled } from "./decimal-scale";
import { accepted, EngineCore } from "./engine-core";
import type { CancelReason, EventLog } from "./events";
import { type OrderNode, type PairBook, toRestingOrder } from "./order-book";
import { FINISHED, hashId } from "./order-index";
import { ResultCodes } from "./result-codes";
import { type StopNode, toStopOrder } from "./stop-book";
import type {
  BookChange,
  CommandEnvelope,
  CommandOutcome,
  PlaceOrderCommand,
  PlaceOrderPayload,
  StopKind,
} from "./types";
import { ParsedPlace } from "./validate-place";

/** Stops one command may trigger, cascades included; the rest stay armed (docs/orders.md). */
export const MAX_STOP_TRIGGERS = 64;

/** A resting order or a stop of the command's user on the command's pair, or why not. */
type OwnOrder = { node: OrderNode } | { stop: StopNode } | { outcome: CommandOutcome };

export abstract class EngineStops extends EngineCore {
  /**
   * The resting order or stop a cancel or amend names, when it is the user's and on the
   * command's pair; otherwise the reject, as a cancel has always answered it.
   */
  protected findOwnOrder(
    command: CommandEnvelope,
    id: string,
    userId: string,
    acceptedBefore: boolean,
  ): OwnOrder {
    const node = this.orders.get(id);
    const stop = this.extras !== 0 ? this.stops.get(id) : undefined;
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
  protected cancelResting(
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
  protected cancelStop(
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

  protected removeStop(stop: StopNode, changes: BookChange[]): void {
    this.bookOf(stop.pairId)!.stops.remove(stop);
    this.stops.delete(stop.id);
    this.recountExtras();
    changes.push({ op: "stop-remove", stop: toStopOrder(stop) });
  }

  /** Puts an accepted stop order in its pair's stop book. */
  protected acceptStop(
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
    this.recountExtras();
    const log = this.log;
    log.reset(command);
    log.push("order.stop-accepted.v1", {
      ...stopTerms(stop),
      quoteVolume: stop.quoteVolumeText,
      timeInForce: stop.timeInForce,
      stp: stop.stp,
      timestamp: stop.timestamp,
    });
    return {
      result: accepted(command.commandId, ResultCodes.stopAccepted, {
        orderId: stop.id,
        orderStatus: "stop-accepted",
        executedVolume: "0",
        remainingVolume: stop.volumeText,
        events: 1,
      }),
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
  protected triggerStops(book: PairBook, command: CommandEnvelope, outcome: CommandOutcome): void {
    if (book.stops.size === 0 || !this.taker.traded) return;
    const pending: StopNode[] = [];
    let triggered = 0;
    for (;;) {
      const taker = this.taker;
      if (taker.traded && triggered < MAX_STOP_TRIGGERS && !this.halts.has(book.pairId)) {
        const trades = { high: taker.tradeHigh, low: taker.tradeLow, last: taker.tradeLast };
        for (const stop of book.stops.triggered(trades, MAX_STOP_TRIGGERS - triggered)) {
          this.removeStop(stop, outcome.changes);
          this.log.push("order.triggered.v1", {
            ...stopTerms(stop),
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
  protected executeStop(
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
}

/** The fields that open both stop events' payloads, in their order. */
function stopTerms(stop: StopNode) {
  return {
    orderId: stop.id,
    userId: stop.userId,
    pairId: stop.pairId,
    side: stop.side,
    type: stop.type,
    price: stop.priceText,
    stopPrice: stop.stopPriceText,
    volume: stop.volumeText,
    volumeTotal: stop.volumeTotalText,
  };
}
