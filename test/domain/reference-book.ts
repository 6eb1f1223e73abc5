// A deliberately naive reference book for differential tests: plain arrays re-sorted on every
// step and decimal.js arithmetic. Slow and obvious, so disagreements point at the fast engine.

import DecimalJs from "decimal.js";
import {
  type CommandEnvelope,
  type CommandResult,
  digestOrders,
  type EventEnvelope,
  type EventType,
  type PlaceOrderCommand,
  ResultCodes,
  resultCodeName,
  type Side,
  type StpMode,
} from "../../src/domain/index";

const Decimal = DecimalJs.clone({ precision: 100, rounding: DecimalJs.ROUND_DOWN });
type Dec = InstanceType<typeof Decimal>;

interface RefOrder {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  price: Dec;
  remaining: Dec;
  volumeTotal: Dec;
  timestamp: number;
  seq: number;
  pd: number;
  ad: number;
  qd: number;
  stp: StpMode;
}

export interface RefOutcome {
  result: CommandResult;
  events: EventEnvelope[];
}

const text = (d: Dec): string => d.toFixed();

/** Mirrors the engine's documented decimal rules, written the slow way with regexes. */
function parse(value: unknown, decimals: number): Dec | { problem: number; reason: string } {
  if (typeof value !== "string") return { problem: ResultCodes.badDecimal, reason: "not a string" };
  if (value === "") return { problem: ResultCodes.badDecimal, reason: "empty" };
  if (value.length > 64)
    return { problem: ResultCodes.magnitudeExceeded, reason: "too many characters" };
  // Read left to right, the first problem met is the one named: a point that starts or ends
  // the text, or the first character that is neither a digit nor the first point.
  const firstPoint = value.indexOf(".");
  const misplacedAt = firstPoint === 0 || firstPoint === value.length - 1 ? firstPoint : -1;
  const badAt = value.search(/[^\d.]|(?<=\..*)\./);
  if (misplacedAt >= 0 && (badAt < 0 || misplacedAt < badAt)) {
    return { problem: ResultCodes.badDecimal, reason: "misplaced point" };
  }
  if (badAt >= 0) {
    const bad = value[badAt]!;
    if (bad === "e" || bad === "E") {
      return { problem: ResultCodes.badDecimal, reason: "exponent notation not accepted" };
    }
    // Negative only when a sign leads an otherwise plain decimal ("-1.5", not "-1e5" or "--1").
    if (bad === "-" && /^-\d+(\.\d+)?$/.test(value))
      return { problem: ResultCodes.nonPositive, reason: "negative value" };
    return { problem: ResultCodes.badDecimal, reason: "not a plain decimal number" };
  }
  const d = new Decimal(value);
  if (d.gte(new Decimal(10).pow(15))) {
    return { problem: ResultCodes.magnitudeExceeded, reason: "more than 15 integer digits" };
  }
  if (d.decimalPlaces() > decimals)
    return { problem: ResultCodes.precisionExceeded, reason: `more than ${decimals} decimals` };
  return d;
}

export class ReferenceBook {
  private orders: RefOrder[] = [];
  private finished = new Set<string>();
  private seq = 0;

  apply(command: CommandEnvelope, alreadyAccepted = false): RefOutcome {
    const events: EventEnvelope[] = [];
    const emit = (type: EventType, payload: Record<string, unknown>) => {
      events.push({
        schemaVersion: 1,
        eventId: `${command.commandId}:${events.length}:${type}`,
        type,
        partition: command.partition,
        pairId: command.pairId,
        commandId: command.commandId,
        correlationId: command.correlationId,
        ordinal: events.length,
        occurredAt: command.submittedAt,
        payload,
      });
    };
    const reject = (code: number, reason: string): RefOutcome => {
      emit("order.rejected.v1", {
        orderId: command.payload.id,
        userId: command.payload.userId,
        pairId: command.pairId,
        commandType: command.type,
        code,
        codeName: resultCodeName(code),
        reason,
      });
      return {
        result: {
          commandId: command.commandId,
          status: "rejected",
          code,
          codeName: resultCodeName(code),
          reason,
          orderStatus: "rejected",
          events: 1,
          orderId: command.payload.id,
        },
        events,
      };
    };
    if (command.type === "order.cancel") {
      const p = command.payload;
      if (p.pairId !== command.pairId)
        return reject(ResultCodes.pairMismatch, "payload pairId differs from envelope");
      const order = this.orders.find((o) => o.id === p.id && o.pairId === command.pairId);
      if (!order) {
        // Finished: remembered so, or accepted before by the shell's marker, and not resting
        // anywhere (an order resting on another pair is unknown on this one).
        const restingElsewhere = this.orders.some((o) => o.id === p.id);
        if (!restingElsewhere && (this.finished.has(p.id) || alreadyAccepted))
          return reject(ResultCodes.orderAlreadyFinished, "order already filled or cancelled");
        return reject(ResultCodes.unknownOrder, "no such resting order");
      }
      if (order.userId !== p.userId)
        return reject(ResultCodes.notOwner, "order belongs to another user");
      this.orders = this.orders.filter((o) => o !== order);
      this.finished.add(order.id);
      const executed = text(order.volumeTotal.minus(order.remaining));
      emit("order.cancelled.v1", {
        orderId: order.id,
        userId: order.userId,
        pairId: order.pairId,
        side: order.side,
        price: text(order.price),
        volume: text(order.remaining),
        volumeTotal: text(order.volumeTotal),
        executedVolume: executed,
        reason: "user",
        code: 0,
      });
      return {
        result: {
          commandId: command.commandId,
          status: "accepted",
          code: 0,
          codeName: "ok",
          orderId: order.id,
          orderStatus: "cancelled",
          executedVolume: executed,
          remainingVolume: text(order.remaining),
          events: 1,
        },
        events,
      };
    }
    return this.place(command, alreadyAccepted, emit, reject, events);
  }

  private place(
    command: PlaceOrderCommand,
    alreadyAccepted: boolean,
    emit: (type: EventType, payload: Record<string, unknown>) => void,
    reject: (code: number, reason: string) => RefOutcome,
    events: EventEnvelope[],
  ): RefOutcome {
    const p = command.payload;
    if (alreadyAccepted || this.orders.some((o) => o.id === p.id) || this.finished.has(p.id)) {
      return {
        result: {
          commandId: command.commandId,
          status: "duplicate",
          code: 400,
          codeName: "duplicate-order",
          orderId: p.id,
          events: 0,
        },
        events: [],
      };
    }
    if (p.pairId !== command.pairId)
      return reject(ResultCodes.pairMismatch, "payload pairId differs from envelope");
    const okDecimals = (n: number) => Number.isInteger(n) && n >= 0 && n <= 18;
    if (
      !okDecimals(p.priceDecimals) ||
      !okDecimals(p.amountDecimals) ||
      !okDecimals(p.quoteDecimals)
    ) {
      return reject(ResultCodes.badPrecision, "decimals must be integers 0..18");
    }
    const limit = p.type === "limit";
    let price = new Decimal(0);
    // Every order's price must be a decimal; only a limit order's must be positive.
    const v = parse(p.price, p.priceDecimals);
    if (!(v instanceof Decimal)) return reject(v.problem, `price: ${v.reason}`);
    if (limit) {
      if (v.isZero()) return reject(ResultCodes.nonPositive, "price: zero");
      price = v;
    }
    const fields = [
      ["volume", p.volume, p.amountDecimals],
      ["volumeTotal", p.volumeTotal, p.amountDecimals],
      ["quoteVolume", p.quoteVolume, p.quoteDecimals],
    ] as const;
    const parsed: Dec[] = [];
    for (const [name, value, d] of fields) {
      const v = parse(value, d);
      if (!(v instanceof Decimal)) return reject(v.problem, `${name}: ${v.reason}`);
      parsed.push(v);
    }
    const [volume, volumeTotal, quoteVolume] = parsed as [Dec, Dec, Dec];
    const quoteSized = p.type === "market" && p.side === "bid" && quoteVolume.gt(0);
    if (!quoteSized) {
      if (volume.isZero()) return reject(ResultCodes.nonPositive, "volume: zero");
      if (volume.gt(volumeTotal))
        return reject(ResultCodes.volumeExceedsTotal, "volume exceeds volumeTotal");
    }
    const tif = p.timeInForce ?? "gtc";
    if (p.postOnly === true && (!limit || tif !== "gtc"))
      return reject(ResultCodes.unsupportedCombination, "post-only needs a GTC limit order");
    if (quoteSized && volume.gt(0))
      return reject(
        ResultCodes.unsupportedCombination,
        "a market bid sized by quoteVolume sends volume 0",
      );
    if (quoteSized && tif === "fok")
      return reject(ResultCodes.unsupportedCombination, "fok needs a base-volume order");
    const pairOrders = this.orders.filter((o) => o.pairId === command.pairId);
    if (
      pairOrders.some(
        (o) => o.pd !== p.priceDecimals || o.ad !== p.amountDecimals || o.qd !== p.quoteDecimals,
      )
    ) {
      return reject(
        ResultCodes.pairPrecisionMismatch,
        "order precisions differ from the resting orders of this pair",
      );
    }
    const makers = pairOrders
      .filter((o) => o.side !== p.side)
      .sort(
        (a, b) => (p.side === "bid" ? a.price.cmp(b.price) : b.price.cmp(a.price)) || a.seq - b.seq,
      );
    const crosses = (m: RefOrder) =>
      !limit || (p.side === "bid" ? m.price.lte(price) : m.price.gte(price));
    if (p.postOnly === true && makers[0] && crosses(makers[0]))
      return reject(ResultCodes.postOnlyWouldTake, "post-only order would take");

    const stp = p.stp ?? "none";
    const priceText = limit ? text(price) : "0";
    let remaining = quoteSized ? new Decimal(0) : volume;
    let budget = quoteVolume;
    let executed = new Decimal(0);
    const executedText = () => text(quoteSized ? executed : volumeTotal.minus(remaining));
    const cancelTaker = (reason: string, code: number) =>
      emit("order.cancelled.v1", {
        orderId: p.id,
        userId: p.userId,
        pairId: p.pairId,
        side: p.side,
        price: priceText,
        volume: text(remaining),
        volumeTotal: text(volumeTotal),
        executedVolume: executedText(),
        reason,
        code,
        quoteVolume: quoteSized ? text(budget) : undefined,
      });
    const finish = (orderStatus: CommandResult["orderStatus"], code: number): RefOutcome => {
      if (orderStatus === "filled" || orderStatus === "cancelled") this.finished.add(p.id);
      return {
        result: {
          commandId: command.commandId,
          status: "accepted",
          code,
          codeName: resultCodeName(code),
          orderId: p.id,
          orderStatus,
          executedVolume: text(executed),
          remainingVolume: text(remaining),
          events: events.length,
        },
        events,
      };
    };
    if (tif === "fok") {
      let available = new Decimal(0);
      let ok = false;
      for (const m of makers) {
        if (!crosses(m)) break;
        if (stp !== "none" && m.userId === p.userId) {
          if (stp === "cancel-maker") continue;
          break;
        }
        available = available.plus(m.remaining);
        if (available.gte(remaining)) {
          ok = true;
          break;
        }
      }
      if (!ok) {
        cancelTaker("fok", ResultCodes.fokNotFilled);
        return finish("cancelled", ResultCodes.fokNotFilled);
      }
    }
    let stpStopped = false;
    let done = false;
    for (let i = 0; i < makers.length; i++) {
      const m = makers[i]!;
      if (!crosses(m) || done) break;
      if (stp !== "none" && m.userId === p.userId) {
        if (stp !== "cancel-taker") {
          this.orders = this.orders.filter((o) => o !== m);
          this.finished.add(m.id);
          emit("order.cancelled.v1", {
            orderId: m.id,
            userId: m.userId,
            pairId: m.pairId,
            side: m.side,
            price: text(m.price),
            volume: text(m.remaining),
            volumeTotal: text(m.volumeTotal),
            executedVolume: text(m.volumeTotal.minus(m.remaining)),
            reason: "stp",
            code: ResultCodes.stpCancelled,
          });
        }
        if (stp !== "cancel-maker") {
          stpStopped = true;
          break;
        }
        continue;
      }
      let fill: Dec;
      if (quoteSized) {
        const affordable = budget.div(m.price).toDecimalPlaces(m.ad, Decimal.ROUND_DOWN);
        fill = Decimal.min(affordable, m.remaining);
        if (fill.isZero()) break;
      } else {
        fill = Decimal.min(remaining, m.remaining);
      }
      // The quote rounds in the book's favour: a resting ask is paid at least its price, a
      // resting bid pays at most its price.
      const quote = m.price
        .times(fill)
        .toDecimalPlaces(m.qd, m.side === "ask" ? Decimal.ROUND_UP : Decimal.ROUND_DOWN);
      m.remaining = m.remaining.minus(fill);
      executed = executed.plus(fill);
      if (quoteSized) budget = budget.minus(quote);
      else remaining = remaining.minus(fill);
      const makerDone = m.remaining.isZero();
      if (makerDone) {
        this.orders = this.orders.filter((o) => o !== m);
        this.finished.add(m.id);
      }
      emit(makerDone ? "order.filled.v1" : "order.updated.v1", {
        orderId: m.id,
        userId: m.userId,
        pairId: m.pairId,
        side: m.side,
        role: "maker",
        price: text(m.price),
        volume: text(m.remaining),
        volumeTotal: text(m.volumeTotal),
        fillPrice: text(m.price),
        fillVolume: text(fill),
        fillQuoteVolume: text(quote),
      });
      done = quoteSized ? budget.isZero() : remaining.isZero();
      // Budget left after a partial fill: try the same maker again before moving on.
      if (!makerDone && !done) i--;
      if (done) {
        emit("order.filled.v1", {
          orderId: p.id,
          userId: p.userId,
          pairId: m.pairId,
          side: p.side,
          role: "taker",
          price: priceText,
          volume: "0",
          volumeTotal: text(volumeTotal),
          fillPrice: text(m.price),
          fillVolume: text(fill),
          fillQuoteVolume: text(quote),
          quoteVolume: quoteSized ? "0" : undefined,
        });
      }
      emit("deal.executed.v1", {
        pairId: m.pairId,
        price: text(m.price),
        volume: text(fill),
        quoteVolume: text(quote),
        makerOrderId: m.id,
        makerUserId: m.userId,
        makerSide: m.side,
        takerOrderId: p.id,
        takerUserId: p.userId,
        takerSide: p.side,
        timestamp: p.timestamp,
      });
    }
    if (quoteSized ? budget.isZero() : remaining.isZero())
      return finish("filled", ResultCodes.filled);
    if (stpStopped) {
      cancelTaker("stp", ResultCodes.stpCancelled);
      return finish("cancelled", ResultCodes.stpCancelled);
    }
    if (limit && tif === "gtc") {
      this.orders.push({
        id: p.id,
        userId: p.userId,
        pairId: p.pairId,
        side: p.side,
        price,
        remaining,
        volumeTotal,
        timestamp: p.timestamp,
        seq: this.seq++,
        pd: p.priceDecimals,
        ad: p.amountDecimals,
        qd: p.quoteDecimals,
        stp,
      });
      emit("order.rested.v1", {
        orderId: p.id,
        userId: p.userId,
        pairId: p.pairId,
        side: p.side,
        price: priceText,
        volume: text(remaining),
        volumeTotal: text(volumeTotal),
        executedVolume: text(volumeTotal.minus(remaining)),
        timestamp: p.timestamp,
        stp,
      });
      const partial = executed.gt(0);
      return finish(
        partial ? "partially-filled-rested" : "rested",
        partial ? ResultCodes.partiallyFilledRested : ResultCodes.rested,
      );
    }
    cancelTaker(limit ? "ioc" : "market-remainder", ResultCodes.remainderCancelled);
    return finish("cancelled", ResultCodes.remainderCancelled);
  }

  restingCount(): number {
    return this.orders.length;
  }

  digest(): string {
    const sorted = [...this.orders].sort(
      (a, b) =>
        a.pairId - b.pairId ||
        (a.side === b.side ? 0 : a.side === "bid" ? -1 : 1) ||
        (a.side === "bid" ? b.price.cmp(a.price) : a.price.cmp(b.price)) ||
        a.seq - b.seq,
    );
    return digestOrders(
      sorted.map((o) => ({
        id: o.id,
        userId: o.userId,
        pairId: o.pairId,
        side: o.side,
        price: text(o.price),
        volume: text(o.remaining),
        volumeTotal: text(o.volumeTotal),
        timestamp: o.timestamp,
        stp: o.stp,
        priceDecimals: o.pd,
        amountDecimals: o.ad,
        quoteDecimals: o.qd,
      })),
    );
  }
}
