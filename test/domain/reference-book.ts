// A deliberately naive reference book for differential tests: plain arrays re-sorted on every
// step and decimal.js arithmetic. Slow and obvious, so disagreements point at the fast engine.
// Stops, amends, cancel-alls, halts, good-till-date orders, the clock, the dead-man's switch,
// icebergs and one-cancels-other lists follow docs/orders.md, written from the page alone.
// A Quirk (below) can make the book do as an engine that departs from the page does, so the
// property tests keep finding everything else; the engine has none today (ENGINE_QUIRKS).

import DecimalJs from "decimal.js";
import {
  type AmendOrderCommand,
  type BookChange,
  type CancelAfterCommand,
  type CancelAllCommand,
  type CancelOrderCommand,
  type ClockTickCommand,
  type CommandEnvelope,
  type CommandResult,
  type DepthLevel,
  type DigestOrder,
  type DigestStop,
  digestBooks,
  type EventEnvelope,
  type EventType,
  type OcoLegResult,
  type OrderAmendedPayload,
  type OrderCancelledPayload,
  type OrderExpiredPayload,
  type OrderRestedPayload,
  type OrderStatus,
  type PairControlCommand,
  type PairControlEventPayload,
  type PlaceOcoCommand,
  type PlaceOrderCommand,
  type PlaceOrderPayload,
  ResultCodes,
  resultCodeName,
  type SessionTriggeredPayload,
  type Side,
  type StopAcceptedPayload,
  type StopKind,
  type StopTriggeredPayload,
  type StpMode,
  type TimeInForce,
} from "../../src/domain/index";

const Decimal = DecimalJs.clone({ precision: 100, rounding: DecimalJs.ROUND_DOWN });
type Dec = InstanceType<typeof Decimal>;

interface RefOrder {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  price: Dec;
  /** The unfilled volume the book sees: an iceberg's part shown. */
  remaining: Dec;
  /** An iceberg's unfilled volume beyond the part shown; zero for every other order. */
  hidden: Dec;
  volumeTotal: Dec;
  timestamp: number;
  seq: number;
  pd: number;
  ad: number;
  qd: number;
  stp: StpMode;
  postOnly: boolean;
  /** A good-till-date order's deadline (epoch ms); undefined for every other order. */
  expireAt?: number;
  /** An iceberg's displayVolume; undefined for every other order. */
  display?: Dec;
  /** A one-cancels-other leg's list and other leg, while the two are linked. */
  listId?: string;
  linked?: string;
}

interface RefStop {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  type: StopKind;
  /** Zero for a stop-market. */
  price: Dec;
  stopPrice: Dec;
  /** Unfilled volume; zero for a quote-sized stop-market bid. */
  volume: Dec;
  volumeTotal: Dec;
  quoteVolume: Dec;
  tif: TimeInForce;
  stp: StpMode;
  timestamp: number;
  seq: number;
  pd: number;
  ad: number;
  qd: number;
  /** A good-till-date stop's deadline (epoch ms); undefined for every other stop. */
  expireAt?: number;
  /** A one-cancels-other leg's list and other leg, while the two are linked. */
  listId?: string;
  linked?: string;
}

/** An incoming order about to match: a place, a triggered stop or a re-matching amend. */
interface Taker {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  limit: boolean;
  /** Zero for market orders. */
  price: Dec;
  /** Unfilled base volume (zero when quote-sized). */
  volume: Dec;
  volumeTotal: Dec;
  quoteVolume: Dec;
  quoteSized: boolean;
  tif: TimeInForce;
  stp: StpMode;
  timestamp: number;
  pd: number;
  ad: number;
  qd: number;
  postOnly: boolean;
  /** The deadline it rests with: a gtd order's, a triggered gtd stop's, an amended order's. */
  expireAt?: number;
  /** An iceberg's displayVolume: what it shows when it rests. */
  display?: Dec;
  /** A re-matching amended leg's link, which it rests with unless it trades. */
  listId?: string;
  linked?: string;
}

/** A taker's running figures while it sweeps the book. */
interface Run {
  /** Unfilled base volume (zero when quote-sized). */
  remaining: Dec;
  budget: Dec;
  executed: Dec;
  /** Prices of the taker's trades, in the order they happened. */
  trades: Dec[];
}

interface TakerOutcome {
  orderStatus: OrderStatus;
  code: number;
  executed: Dec;
  remaining: Dec;
  /** Prices of the taker's trades, in the order they happened. */
  trades: Dec[];
}

export interface RefOutcome {
  result: CommandResult;
  events: EventEnvelope[];
  /**
   * The dead-man's switch changes, in order (switch-put / switch-remove, sweep-put /
   * sweep-remove); only on session.cancel-after and clock.tick. The reference does not model
   * the book changes.
   */
  sessionChanges?: SessionChange[];
}

/** The BookChange ops that describe switches and sweeps. */
export type SessionChange = Extract<
  BookChange,
  { op: "switch-put" | "switch-remove" | "sweep-put" | "sweep-remove" }
>;

/** A cancellation's reason as the reference emits it (a taker's own are written out). */
type CancelReason = "user" | "cancel-all" | "cancel-after" | "stp" | "amend" | "oco";

/**
 * Where the engine departs from docs/orders.md. Each makes the reference do as the engine does;
 * property.test.ts pins each with a failing case against the book without it.
 *
 * - `oco-no-triggered-stops`: an order.place-oco whose legs' trades triggered stops has no
 *   `triggeredStops` in its result ("A result whose command triggered stops has
 *   `triggeredStops`").
 * - `oco-late-leg-checks`: the second leg's halt, precision and post-only checks run only when it
 *   is placed, after the first: a refused second leg withdraws the first and the list is
 *   accepted ("each leg's own checks (the place checks ...) run before either is placed; a
 *   refusal ... places nothing").
 * - `oco-unplaced-leg-as-sent`: the never-placed second leg's order.cancelled.v1 (and its leg
 *   result) carries the payload's texts as sent (not canonical, a stop-market's ignored price),
 *   and no `stopPrice` or `quoteVolume` for a stop.
 * - `cancel-counts-one-event`: an order.cancel's result says `events: 1` also when the cancel
 *   took a list's other leg with it (two events).
 * - `fok-walk`: a fill-or-kill taker adds up the volumes along the book (an iceberg's hidden
 *   part where the iceberg is) instead of asking whether the sweep would fill it: past an
 *   iceberg's refreshed part, self-trade prevention can stop the taker after partial fills.
 */
export type Quirk =
  | "oco-no-triggered-stops"
  | "oco-late-leg-checks"
  | "oco-unplaced-leg-as-sent"
  | "cancel-counts-one-event"
  | "fok-walk";

/** Every quirk the engine has today: what the property tests run the reference with. */
export const ENGINE_QUIRKS: readonly Quirk[] = [];

/** An order.place's terms once its payload and deadline checks passed. */
interface PlaceTerms {
  limit: boolean;
  stop: boolean;
  /** Zero unless a limit or stop-limit order. */
  price: Dec;
  /** Zero unless a stop. */
  stopPrice: Dec;
  volume: Dec;
  volumeTotal: Dec;
  quoteVolume: Dec;
  quoteSized: boolean;
  tif: TimeInForce;
  stp: StpMode;
  expireAt?: number;
  display?: Dec;
}

/** A refusal's code and reason. */
interface Refusal {
  code: number;
  reason: string;
}

/** What an accepted order.place did, as its result reports it. */
interface Placed {
  code: number;
  orderStatus: OrderStatus;
  executedVolume: string;
  remainingVolume: string;
  triggered: number;
}

/** A live order or stop as the generator of the property test sees it. */
export interface RefLiveOrder {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  kind: "limit" | StopKind;
  price: string;
  stopPrice?: string;
  volumeTotal: string;
  /** Unfilled volume. */
  volume: string;
  executed: string;
  quoteSized: boolean;
  postOnly: boolean;
  stp: StpMode;
  /** Only on good-till-date orders and stops. */
  expireAt?: number;
  /** Only on icebergs: `volume` above counts the hidden part too. */
  displayVolume?: string;
  hiddenVolume?: string;
  /** Only on linked one-cancels-other legs. */
  listId?: string;
  linkedOrderId?: string;
}

/**
 * `pairId`: the event envelope's pair when not the command's (a clock.tick's expiry, a
 * cancellation of a cancel-all that spans pairs).
 */
type Emit = (type: EventType, payload: Record<string, unknown>, pairId?: number) => void;

/** The bounds of docs/orders.md. */
export const MAX_TRIGGERED_STOPS = 64;
export const MAX_CANCEL_ALL = 1_000;
export const MAX_EXPIRIES = 1_000;
/** How far past the engine's time an expireAt may lie: 90 days. */
export const MAX_EXPIRY_AHEAD = 7_776_000_000;
/** A session.cancel-after's timeoutMs: 0 (disarm), or a second to a day. */
export const MIN_CANCEL_AFTER = 1_000;
export const MAX_CANCEL_AFTER = 86_400_000;

/** Canonical decimal text; values are immutable, so each one's is made once. */
const texts = new WeakMap<Dec, string>();
const text = (d: Dec): string => {
  let t = texts.get(d);
  if (t === undefined) {
    t = d.toFixed();
    texts.set(d, t);
  }
  return t;
};

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

const isStopKind = (type: unknown): type is StopKind =>
  type === "stop-limit" || type === "stop-market";

const stopQuoteSized = (s: RefStop) =>
  s.type === "stop-market" && s.side === "bid" && s.quoteVolume.gt(0);

/** Book order within one pair: bids best first, then asks best first, FIFO in a level. */
const bookOrder = (a: RefOrder, b: RefOrder) =>
  (a.side === b.side ? 0 : a.side === "bid" ? -1 : 1) ||
  (a.side === "bid" ? b.price.cmp(a.price) : a.price.cmp(b.price)) ||
  a.seq - b.seq;

/** A resting order's whole unfilled volume: an iceberg's part shown and its hidden part. */
const unfilledOf = (o: RefOrder): Dec =>
  o.display === undefined ? o.remaining : o.remaining.plus(o.hidden);

/** A duplicate's result: nothing happens, no event. */
const duplicate = (commandId: string, orderId: string): RefOutcome => ({
  result: {
    commandId,
    status: "duplicate",
    code: ResultCodes.duplicateOrder,
    codeName: "duplicate-order",
    orderId,
    events: 0,
  },
  events: [],
});

/**
 * Why an order.place-oco's legs cannot make one list (209): two legs, two ids, the list's user
 * and pair, each a GTC or GTD limit order or a stop, one stp mode, one set of precisions. The
 * page names the rules; the reasons are the engine's.
 */
function listReason(legs: PlaceOrderPayload[], userId: string, pairId: number): string | undefined {
  if (legs.length !== 2) return "a one-cancels-other list has two legs";
  const [a, b] = legs as [PlaceOrderPayload, PlaceOrderPayload];
  if (a.id === b.id) return "the legs need two order ids";
  for (const leg of legs) {
    if (leg.userId !== userId || leg.pairId !== pairId)
      return "both legs are the list's user's, on its pair";
    const tif = leg.timeInForce ?? "gtc";
    const rests = leg.type === "limit" && (tif === "gtc" || tif === "gtd");
    if (!isStopKind(leg.type) && !rests) return "a leg is a GTC or GTD limit order or a stop order";
  }
  if ((a.stp ?? "none") !== (b.stp ?? "none")) return "both legs share one stp mode";
  const decimals = (l: PlaceOrderPayload) =>
    `${l.priceDecimals}/${l.amountDecimals}/${l.quoteDecimals}`;
  if (decimals(a) !== decimals(b)) return "both legs have the pair's precisions";
  return undefined;
}

/** A leg that rested or waits as a stop without a trade: the list goes on. */
const waits = (placed: Placed): boolean =>
  (placed.orderStatus === "rested" || placed.orderStatus === "stop-accepted") &&
  placed.executedVolume === "0";

const legResult = (orderId: string, placed: Placed): OcoLegResult => ({
  orderId,
  code: placed.code,
  codeName: resultCodeName(placed.code),
  orderStatus: placed.orderStatus,
  executedVolume: placed.executedVolume,
  remainingVolume: placed.remainingVolume,
});

export class ReferenceBook {
  private orders: RefOrder[] = [];
  private stops: RefStop[] = [];
  private halts = new Map<number, string>();
  private finished = new Set<string>();
  private seq = 0;
  /** The engine's time: the latest clock.tick's `now`, 0 before one. */
  private time = 0;
  /** Armed dead-man's switches: user id to deadline. */
  private armedSwitches = new Map<string, number>();
  /** Users whose switch fired and who still have orders to cancel: user id to deadline. */
  private pendingSweeps = new Map<string, number>();
  /** Where it does as the engine does rather than as docs/orders.md says. */
  private readonly quirks: ReadonlySet<Quirk>;

  constructor(options: { quirks?: Iterable<Quirk> } = {}) {
    this.quirks = new Set(options.quirks);
  }

  apply(command: CommandEnvelope, alreadyAccepted = false): RefOutcome {
    const events: EventEnvelope[] = [];
    const emit: Emit = (type, payload, pairId = command.pairId) => {
      events.push({
        schemaVersion: 1,
        eventId: `${command.commandId}:${events.length}:${type}`,
        type,
        partition: command.partition,
        pairId,
        commandId: command.commandId,
        correlationId: command.correlationId,
        ordinal: events.length,
        occurredAt: command.submittedAt,
        payload,
      });
    };
    const reject = (code: number, reason: string): RefOutcome => {
      const payload = command.payload as { id?: unknown; userId?: unknown };
      const orderId = typeof payload.id === "string" ? payload.id : undefined;
      const userId = typeof payload.userId === "string" ? payload.userId : undefined;
      const rejected: Record<string, unknown> = {};
      if (orderId !== undefined) rejected.orderId = orderId;
      if (userId !== undefined) rejected.userId = userId;
      rejected.pairId = command.pairId;
      rejected.commandType = command.type;
      rejected.code = code;
      rejected.codeName = resultCodeName(code);
      rejected.reason = reason;
      emit("order.rejected.v1", rejected);
      const result: CommandResult = {
        commandId: command.commandId,
        status: "rejected",
        code,
        codeName: resultCodeName(code),
        reason,
        orderStatus: "rejected",
        events: 1,
      };
      if (orderId !== undefined) result.orderId = orderId;
      return { result, events };
    };
    const ctx = { command, alreadyAccepted, emit, reject, events };
    switch (command.type) {
      case "order.place":
        return this.place({ ...ctx, command });
      case "order.place-oco":
        return this.placeOco({ ...ctx, command });
      case "order.cancel":
        return this.cancel({ ...ctx, command });
      case "order.amend":
        return this.amend({ ...ctx, command });
      case "order.cancel-all":
        return this.cancelAll({ ...ctx, command });
      case "pair.halt":
      case "pair.resume":
        return this.pairControl({ ...ctx, command });
      case "clock.tick":
        return this.tick({ ...ctx, command });
      case "session.cancel-after":
        return this.cancelAfter({ ...ctx, command });
      default:
        // A command the engine knows and docs/orders.md's sections above do not describe.
        throw new Error(`the reference book does not model ${(command as { type: string }).type}`);
    }
  }

  // --- order.cancel -----------------------------------------------------------------------

  private cancel(ctx: Ctx<CancelOrderCommand>): RefOutcome {
    const { command, emit, reject, events } = ctx;
    const p = command.payload;
    if (p.pairId !== command.pairId)
      return reject(ResultCodes.pairMismatch, "payload pairId differs from envelope");
    const order = this.orders.find((o) => o.id === p.id && o.pairId === command.pairId);
    const stop = this.stops.find((s) => s.id === p.id && s.pairId === command.pairId);
    if (!order && !stop) {
      const missing = this.missing(p.id, ctx.alreadyAccepted);
      return reject(missing.code, missing.reason);
    }
    if ((order ?? stop)!.userId !== p.userId)
      return reject(ResultCodes.notOwner, "order belongs to another user");
    const { executed, remaining } = order
      ? this.cancelOrder(order, "user", emit)
      : this.cancelStop(stop!, "user", emit);
    return {
      result: {
        commandId: command.commandId,
        status: "accepted",
        code: 0,
        codeName: "ok",
        orderId: p.id,
        orderStatus: "cancelled",
        executedVolume: executed,
        remainingVolume: remaining,
        events: this.quirks.has("cancel-counts-one-event") ? 1 : events.length,
      },
      events,
    };
  }

  /**
   * Why an order id was not found on the command's pair, as a cancel (and an amend) says it:
   * finished when remembered so, or accepted before by the shell's marker, and not live
   * anywhere (an order live on another pair is unknown on this one).
   */
  private missing(id: string, alreadyAccepted: boolean): { code: number; reason: string } {
    const liveElsewhere =
      this.orders.some((o) => o.id === id) || this.stops.some((s) => s.id === id);
    if (!liveElsewhere && (this.finished.has(id) || alreadyAccepted))
      return {
        code: ResultCodes.orderAlreadyFinished,
        reason: "order already filled or cancelled",
      };
    return { code: ResultCodes.unknownOrder, reason: "no such resting order" };
  }

  /**
   * Takes a resting order out with its order.cancelled.v1 (an iceberg's hidden part too), and
   * its list's other leg after it.
   */
  private cancelOrder(
    order: RefOrder,
    reason: CancelReason,
    emit: Emit,
    code: number = ResultCodes.ok,
  ): { executed: string; remaining: string } {
    this.orders = this.orders.filter((o) => o !== order);
    this.finished.add(order.id);
    const left = unfilledOf(order);
    const executed = text(order.volumeTotal.minus(left));
    emit(
      "order.cancelled.v1",
      {
        orderId: order.id,
        userId: order.userId,
        pairId: order.pairId,
        side: order.side,
        price: text(order.price),
        volume: text(left),
        volumeTotal: text(order.volumeTotal),
        executedVolume: executed,
        reason,
        code,
      } satisfies OrderCancelledPayload,
      // On the order's own pair: a cancel-all of the partition spans pairs. (The docs say so
      // of a tick's cancellations; of a cancel-all only the commit d0373de does.)
      order.pairId,
    );
    this.breakLink(order, emit);
    return { executed, remaining: text(left) };
  }

  private cancelStop(
    stop: RefStop,
    reason: CancelReason,
    emit: Emit,
  ): { executed: string; remaining: string } {
    this.stops = this.stops.filter((s) => s !== stop);
    this.finished.add(stop.id);
    const executed = text(stop.volumeTotal.minus(stop.volume));
    const payload: OrderCancelledPayload = {
      orderId: stop.id,
      userId: stop.userId,
      pairId: stop.pairId,
      side: stop.side,
      price: text(stop.price),
      volume: text(stop.volume),
      volumeTotal: text(stop.volumeTotal),
      executedVolume: executed,
      reason,
      code: 0,
    };
    // A quote-sized stop-market bid is a quote-sized market bid waiting: its budget is what
    // is left of it (see the report: the page names only stopPrice).
    if (stopQuoteSized(stop)) payload.quoteVolume = text(stop.quoteVolume);
    payload.stopPrice = text(stop.stopPrice);
    emit("order.cancelled.v1", { ...payload }, stop.pairId); // as cancelOrder
    this.breakLink(stop, emit);
    return { executed, remaining: text(stop.volume) };
  }

  /**
   * Ends a one-cancels-other list when one of its legs fills (even partly), triggers, is
   * cancelled or expires: the link goes from both legs, and the other is cancelled, reason oco.
   */
  private breakLink(leg: RefOrder | RefStop, emit: Emit): void {
    const otherId = leg.linked;
    if (otherId === undefined) return;
    leg.linked = undefined;
    leg.listId = undefined;
    const other =
      this.orders.find((o) => o.id === otherId) ?? this.stops.find((s) => s.id === otherId);
    if (other?.linked !== leg.id) return;
    other.linked = undefined;
    other.listId = undefined;
    if ("stopPrice" in other) this.cancelStop(other, "oco", emit);
    else this.cancelOrder(other, "oco", emit);
  }

  // --- order.place ------------------------------------------------------------------------

  private place(ctx: Ctx<PlaceOrderCommand>): RefOutcome {
    const { command, alreadyAccepted, emit, reject, events } = ctx;
    const p = command.payload;
    if (alreadyAccepted || this.known(p.id)) return duplicate(command.commandId, p.id);
    const terms = this.checkPayload(p, command.pairId);
    if ("code" in terms) return reject(terms.code, terms.reason);
    const refused = this.checkBook(p, terms, command.pairId);
    if (refused !== undefined) return reject(refused.code, refused.reason);
    const placed = this.accept(p, terms, emit);
    const result: CommandResult = {
      commandId: command.commandId,
      status: "accepted",
      code: placed.code,
      codeName: resultCodeName(placed.code),
      orderId: p.id,
      orderStatus: placed.orderStatus,
      executedVolume: placed.executedVolume,
      remainingVolume: placed.remainingVolume,
      events: events.length,
    };
    if (placed.triggered > 0) result.triggeredStops = placed.triggered;
    return { result, events };
  }

  /** An order id in use: resting, waiting as a stop, or finished. */
  private known(id: string): boolean {
    return (
      this.orders.some((o) => o.id === id) ||
      this.stops.some((s) => s.id === id) ||
      this.finished.has(id)
    );
  }

  /**
   * An order.place payload's own checks, then its deadline's against the engine's time: its
   * terms, or the first refusal.
   */
  private checkPayload(p: PlaceOrderPayload, envelopePairId: number): PlaceTerms | Refusal {
    if (p.pairId !== envelopePairId)
      return { code: ResultCodes.pairMismatch, reason: "payload pairId differs from envelope" };
    const okDecimals = (n: number) => Number.isInteger(n) && n >= 0 && n <= 18;
    if (
      !okDecimals(p.priceDecimals) ||
      !okDecimals(p.amountDecimals) ||
      !okDecimals(p.quoteDecimals)
    ) {
      return { code: ResultCodes.badPrecision, reason: "decimals must be integers 0..18" };
    }
    const limit = p.type === "limit";
    const stop = isStopKind(p.type);
    const priced = limit || p.type === "stop-limit";
    let price = new Decimal(0);
    // Every order's price must be a decimal; only a limit order's (and a stop-limit's) must be
    // positive.
    const v = parse(p.price, p.priceDecimals);
    if (!(v instanceof Decimal)) return { code: v.problem, reason: `price: ${v.reason}` };
    if (priced) {
      if (v.isZero()) return { code: ResultCodes.nonPositive, reason: "price: zero" };
      price = v;
    }
    // A stop's stopPrice right after the price, with the same codes; ignored on other orders.
    let stopPrice = new Decimal(0);
    if (stop) {
      if (p.stopPrice === undefined)
        return { code: ResultCodes.badEnvelope, reason: "stopPrice: required for stop orders" };
      const s = parse(p.stopPrice, p.priceDecimals);
      if (!(s instanceof Decimal)) return { code: s.problem, reason: `stopPrice: ${s.reason}` };
      if (s.isZero()) return { code: ResultCodes.nonPositive, reason: "stopPrice: zero" };
      stopPrice = s;
    }
    const fields = [
      ["volume", p.volume, p.amountDecimals],
      ["volumeTotal", p.volumeTotal, p.amountDecimals],
      ["quoteVolume", p.quoteVolume, p.quoteDecimals],
    ] as const;
    const parsed: Dec[] = [];
    for (const [name, value, d] of fields) {
      const v = parse(value, d);
      if (!(v instanceof Decimal)) return { code: v.problem, reason: `${name}: ${v.reason}` };
      parsed.push(v);
    }
    const [volume, volumeTotal, quoteVolume] = parsed as [Dec, Dec, Dec];
    const marketLike = p.type === "market" || p.type === "stop-market";
    const quoteSized = marketLike && p.side === "bid" && quoteVolume.gt(0);
    if (!quoteSized) {
      if (volume.isZero()) return { code: ResultCodes.nonPositive, reason: "volume: zero" };
      if (volume.gt(volumeTotal))
        return { code: ResultCodes.volumeExceedsTotal, reason: "volume exceeds volumeTotal" };
    }
    // An iceberg's displayVolume after the volume checks, with the usual decimal codes.
    let display: Dec | undefined;
    if (p.displayVolume !== undefined) {
      const d = parse(p.displayVolume, p.amountDecimals);
      if (!(d instanceof Decimal)) return { code: d.problem, reason: `displayVolume: ${d.reason}` };
      if (d.isZero()) return { code: ResultCodes.nonPositive, reason: "displayVolume: zero" };
      display = d;
    }
    const tif = p.timeInForce ?? "gtc";
    const unsupported = (reason: string) => ({ code: ResultCodes.unsupportedCombination, reason });
    if (p.postOnly === true && stop) return unsupported("post-only cannot be a stop order");
    if (p.postOnly === true && (!limit || (tif !== "gtc" && tif !== "gtd")))
      return unsupported("post-only needs a GTC or GTD limit order");
    if (quoteSized && volume.gt(0))
      return unsupported("a market bid sized by quoteVolume sends volume 0");
    if (quoteSized && tif === "fok") return unsupported("fok needs a base-volume order");
    // gtd and expireAt go together, and never on a market order (it never rests).
    const gtd = tif === "gtd";
    if (gtd && p.expireAt === undefined) return unsupported("gtd needs expireAt");
    if (!gtd && p.expireAt !== undefined) return unsupported("expireAt needs timeInForce gtd");
    if (gtd && p.type === "market")
      return unsupported("a market order cannot be gtd: it never rests");
    // An iceberg is a resting limit order that shows less than its volume.
    if (display !== undefined && (!limit || (tif !== "gtc" && tif !== "gtd")))
      return unsupported("an iceberg is a GTC or GTD limit order");
    if (display?.gte(volume)) return unsupported("displayVolume must be below volume");
    // The deadline against the engine's time: after the checks above, before the halt check.
    // (The pair-precision check, 210, stays after the halt check, where it always was.)
    const expireAt = p.expireAt;
    if (expireAt !== undefined && expireAt <= this.time)
      return {
        code: ResultCodes.expiryInPast,
        reason: `expireAt ${expireAt} is not after ${this.time}`,
      };
    if (expireAt !== undefined && expireAt > this.time + MAX_EXPIRY_AHEAD)
      return {
        code: ResultCodes.expiryTooFar,
        reason: `expireAt ${expireAt} is more than 90 days after ${this.time}`,
      };
    return {
      limit,
      stop,
      price,
      stopPrice,
      volume,
      volumeTotal,
      quoteVolume,
      quoteSized,
      tif,
      stp: p.stp ?? "none",
      expireAt,
      display,
    };
  }

  /** An order.place's checks against the books: the halt, the pair's precisions, post-only. */
  private checkBook(p: PlaceOrderPayload, terms: PlaceTerms, pairId: number): Refusal | undefined {
    if (this.halts.has(pairId)) return { code: ResultCodes.pairHalted, reason: "pair is halted" };
    const differs = (o: { pd: number; ad: number; qd: number }) =>
      o.pd !== p.priceDecimals || o.ad !== p.amountDecimals || o.qd !== p.quoteDecimals;
    if (
      this.orders.some((o) => o.pairId === pairId && differs(o)) ||
      this.stops.some((s) => s.pairId === pairId && differs(s))
    ) {
      return {
        code: ResultCodes.pairPrecisionMismatch,
        reason: "order precisions differ from the resting orders of this pair",
      };
    }
    if (p.postOnly === true && !terms.stop) {
      const best = this.makersFor({ pairId, side: p.side })[0];
      if (best && this.crosses({ limit: true, side: p.side, price: terms.price }, best))
        return { code: ResultCodes.postOnlyWouldTake, reason: "post-only order would take" };
    }
    return undefined;
  }

  /** An order that passed every check: a stop waits, anything else matches. */
  private accept(p: PlaceOrderPayload, terms: PlaceTerms, emit: Emit): Placed {
    const { price, stopPrice, volume, volumeTotal, quoteVolume, quoteSized, tif, stp } = terms;
    const { expireAt } = terms;
    if (terms.stop) {
      const stop: RefStop = {
        id: p.id,
        userId: p.userId,
        pairId: p.pairId,
        side: p.side,
        type: p.type as StopKind,
        price,
        stopPrice,
        volume,
        volumeTotal,
        quoteVolume,
        tif,
        stp,
        timestamp: p.timestamp,
        seq: this.seq++,
        pd: p.priceDecimals,
        ad: p.amountDecimals,
        qd: p.quoteDecimals,
        expireAt,
      };
      this.stops.push(stop);
      emit("order.stop-accepted.v1", {
        orderId: stop.id,
        userId: stop.userId,
        pairId: stop.pairId,
        side: stop.side,
        type: stop.type,
        price: text(stop.price),
        stopPrice: text(stop.stopPrice),
        volume: text(stop.volume),
        volumeTotal: text(stop.volumeTotal),
        quoteVolume: text(stop.quoteVolume),
        timeInForce: stop.tif,
        stp: stop.stp,
        timestamp: stop.timestamp,
        ...(expireAt === undefined ? {} : { expireAt }),
      } satisfies StopAcceptedPayload);
      return {
        code: ResultCodes.stopAccepted,
        orderStatus: "stop-accepted",
        executedVolume: "0",
        remainingVolume: text(volume),
        triggered: 0,
      };
    }
    const taker: Taker = {
      id: p.id,
      userId: p.userId,
      pairId: p.pairId,
      side: p.side,
      limit: terms.limit,
      price,
      volume: quoteSized ? new Decimal(0) : volume,
      volumeTotal,
      quoteVolume,
      quoteSized,
      tif,
      stp,
      timestamp: p.timestamp,
      pd: p.priceDecimals,
      ad: p.amountDecimals,
      qd: p.quoteDecimals,
      postOnly: p.postOnly === true,
      expireAt,
      display: terms.display,
    };
    const outcome = this.take(taker, emit, false);
    const triggered = this.runTriggers(taker.pairId, outcome.trades, emit);
    return {
      code: outcome.code,
      orderStatus: outcome.orderStatus,
      executedVolume: text(outcome.executed),
      remainingVolume: text(outcome.remaining),
      triggered,
    };
  }

  // --- order.place-oco --------------------------------------------------------------------

  private placeOco(ctx: Ctx<PlaceOcoCommand>): RefOutcome {
    const { command, alreadyAccepted, emit, reject, events } = ctx;
    const p = command.payload;
    if (p.pairId !== command.pairId)
      return reject(ResultCodes.pairMismatch, "payload pairId differs from envelope");
    const why = listReason(p.legs, p.userId, p.pairId);
    if (why !== undefined) return reject(ResultCodes.unsupportedCombination, why);
    const [a, b] = p.legs as [PlaceOrderPayload, PlaceOrderPayload];
    if (alreadyAccepted || this.known(a.id) || this.known(b.id))
      return duplicate(command.commandId, a.id);
    // Refused whole or not at all: every leg's checks before either is placed, each refusal
    // naming its leg (numbered from 0, as the engine does).
    const terms: PlaceTerms[] = [];
    for (const [i, leg] of p.legs.entries()) {
      const checked = this.checkPayload(leg, command.pairId);
      if ("code" in checked) return reject(checked.code, `leg ${i}: ${checked.reason}`);
      terms.push(checked);
    }
    const lateChecks = this.quirks.has("oco-late-leg-checks");
    for (const [i, leg] of p.legs.entries()) {
      if (lateChecks && i > 0) break;
      const refused = this.checkBook(leg, terms[i]!, command.pairId);
      if (refused !== undefined) return reject(refused.code, `leg ${i}: ${refused.reason}`);
    }
    // A post-only second leg that would cross the first once it rests: refused whole too.
    const [t0, t1] = terms as [PlaceTerms, PlaceTerms];
    if (
      !lateChecks &&
      b.postOnly === true &&
      !t1.stop &&
      a.type === "limit" &&
      a.side !== b.side &&
      (b.side === "bid" ? t0.price.lte(t1.price) : t0.price.gte(t1.price))
    ) {
      return reject(ResultCodes.postOnlyWouldTake, "leg 1: post-only order would take");
    }
    // Then each leg as its order.place, the first first. One that trades on arrival, or does
    // not rest, ends the list.
    const first = this.accept(a, terms[0]!, emit);
    const legs: OcoLegResult[] = [legResult(a.id, first)];
    let triggered = first.triggered;
    if (!waits(first)) {
      legs.push(this.neverPlaced(b, terms[1]!, emit));
    } else {
      // The second leg's book checks again: the first now rests (a post-only second leg may
      // cross it).
      const refused = this.checkBook(b, terms[1]!, command.pairId);
      let second: Placed | undefined;
      if (refused !== undefined) {
        // As its order.place would refuse it.
        emit("order.rejected.v1", {
          orderId: b.id,
          userId: b.userId,
          pairId: command.pairId,
          commandType: "order.place",
          code: refused.code,
          codeName: resultCodeName(refused.code),
          reason: refused.reason,
        });
        legs.push({
          orderId: b.id,
          code: refused.code,
          codeName: resultCodeName(refused.code),
          orderStatus: "rejected",
        });
      } else {
        second = this.accept(b, terms[1]!, emit);
        legs.push(legResult(b.id, second));
        triggered += second.triggered;
      }
      const firstLive = [...this.orders, ...this.stops].some((x) => x.id === a.id);
      if (second === undefined || !waits(second)) this.withdraw(a.id, emit);
      // The second's self-trade prevention cancelled the first (cancel-maker): the list ends as
      // a cancelled leg ends it, with the second. (The page does not say; the engine breaks.)
      else if (!firstLive) this.withdraw(b.id, emit);
      else this.link(a.id, b.id, p.listId);
    }
    const result: CommandResult = {
      commandId: command.commandId,
      status: "accepted",
      code: ResultCodes.ok,
      codeName: "ok",
      orderId: a.id,
      listId: p.listId,
      legs,
      events: events.length,
    };
    if (triggered > 0 && !this.quirks.has("oco-no-triggered-stops"))
      result.triggeredStops = triggered;
    return { result, events };
  }

  /** The second leg, never placed since the first traded: reported cancelled, reason oco. */
  private neverPlaced(leg: PlaceOrderPayload, terms: PlaceTerms, emit: Emit): OcoLegResult {
    this.finished.add(leg.id);
    const asSent = this.quirks.has("oco-unplaced-leg-as-sent");
    const volume = asSent ? leg.volume : text(terms.quoteSized ? new Decimal(0) : terms.volume);
    const payload: OrderCancelledPayload = {
      orderId: leg.id,
      userId: leg.userId,
      pairId: leg.pairId,
      side: leg.side,
      price: asSent ? leg.price : text(terms.price),
      volume,
      volumeTotal: asSent ? leg.volumeTotal : text(terms.volumeTotal),
      executedVolume: "0",
      reason: "oco",
      code: ResultCodes.ok,
    };
    // As a placed stop's cancel would read.
    if (!asSent && terms.quoteSized) payload.quoteVolume = text(terms.quoteVolume);
    if (!asSent && terms.stop) payload.stopPrice = text(terms.stopPrice);
    emit("order.cancelled.v1", { ...payload }, leg.pairId);
    return {
      orderId: leg.id,
      code: ResultCodes.ok,
      codeName: "ok",
      orderStatus: "cancelled",
      executedVolume: "0",
      remainingVolume: volume,
    };
  }

  /** The first leg, if it still waits or rests, goes: the second traded or was refused. */
  private withdraw(id: string, emit: Emit): void {
    const stop = this.stops.find((s) => s.id === id);
    const order = this.orders.find((o) => o.id === id);
    if (stop) this.cancelStop(stop, "oco", emit);
    else if (order) this.cancelOrder(order, "oco", emit);
  }

  /** Links two waiting legs, each to the other. */
  private link(a: string, b: string, listId: string): void {
    for (const [id, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const leg = this.orders.find((o) => o.id === id) ?? this.stops.find((s) => s.id === id)!;
      leg.listId = listId;
      leg.linked = other;
    }
  }

  private takerResult(
    commandId: string,
    orderId: string,
    outcome: TakerOutcome,
    events: EventEnvelope[],
    triggered: number,
  ): RefOutcome {
    const result: CommandResult = {
      commandId,
      status: "accepted",
      code: outcome.code,
      codeName: resultCodeName(outcome.code),
      orderId,
      orderStatus: outcome.orderStatus,
      executedVolume: text(outcome.executed),
      remainingVolume: text(outcome.remaining),
      events: events.length,
    };
    if (triggered > 0) result.triggeredStops = triggered;
    return { result, events };
  }

  /** The taker's pair's opposite side, best first then FIFO. */
  private makersFor(t: Pick<Taker, "pairId" | "side">): RefOrder[] {
    return this.orders
      .filter((o) => o.pairId === t.pairId && o.side !== t.side)
      .sort(
        (a, b) => (t.side === "bid" ? a.price.cmp(b.price) : b.price.cmp(a.price)) || a.seq - b.seq,
      );
  }

  private crosses(t: Pick<Taker, "limit" | "side" | "price">, m: RefOrder): boolean {
    return !t.limit || (t.side === "bid" ? m.price.lte(t.price) : m.price.gte(t.price));
  }

  /**
   * Matches one taker against its pair's book, emitting the events an order.place emits.
   * `amend`: the taker is a re-matching amended order (a GTC limit order): its accepted codes
   * are 0, or 105 when self-trade prevention stopped it.
   */
  private take(t: Taker, emit: Emit, amend: boolean): TakerOutcome {
    const { stp, quoteSized, volumeTotal, tif } = t;
    const priceText = t.limit ? text(t.price) : "0";
    const run: Run = {
      remaining: t.volume,
      budget: t.quoteVolume,
      executed: new Decimal(0),
      trades: [],
    };
    const executedText = () => text(quoteSized ? run.executed : volumeTotal.minus(run.remaining));
    const cancelTaker = (reason: string, code: number) =>
      emit("order.cancelled.v1", {
        orderId: t.id,
        userId: t.userId,
        pairId: t.pairId,
        side: t.side,
        price: priceText,
        volume: text(run.remaining),
        volumeTotal: text(volumeTotal),
        executedVolume: executedText(),
        reason,
        code,
        quoteVolume: quoteSized ? text(run.budget) : undefined,
      });
    const finish = (orderStatus: OrderStatus, code: number): TakerOutcome => {
      if (orderStatus === "filled" || orderStatus === "cancelled") this.finished.add(t.id);
      const accepted = amend && code !== ResultCodes.stpCancelled ? ResultCodes.ok : code;
      return {
        orderStatus,
        code: accepted,
        executed: run.executed,
        remaining: run.remaining,
        trades: run.trades,
      };
    };
    if (tif === "fok" && !this.fokFills(t)) {
      cancelTaker("fok", ResultCodes.fokNotFilled);
      return finish("cancelled", ResultCodes.fokNotFilled);
    }
    const stpStopped = this.sweepBook(t, run, emit);
    if (quoteSized ? run.budget.isZero() : run.remaining.isZero())
      return finish("filled", ResultCodes.filled);
    if (stpStopped) {
      cancelTaker("stp", ResultCodes.stpCancelled);
      return finish("cancelled", ResultCodes.stpCancelled);
    }
    // A gtd order rests as a gtc one does, with its deadline; an iceberg shows its display (or
    // all that is left, if less) and hides the rest.
    if (t.limit && (tif === "gtc" || tif === "gtd")) {
      const shown = t.display === undefined ? run.remaining : Decimal.min(t.display, run.remaining);
      const order: RefOrder = {
        id: t.id,
        userId: t.userId,
        pairId: t.pairId,
        side: t.side,
        price: t.price,
        remaining: shown,
        hidden: run.remaining.minus(shown),
        volumeTotal,
        timestamp: t.timestamp,
        seq: this.seq++,
        pd: t.pd,
        ad: t.ad,
        qd: t.qd,
        stp,
        postOnly: t.postOnly,
        expireAt: t.expireAt,
        display: t.display,
        listId: t.listId,
        linked: t.linked,
      };
      this.orders.push(order);
      this.emitRested(order, emit);
      const partial = run.executed.gt(0);
      return finish(
        partial ? "partially-filled-rested" : "rested",
        partial ? ResultCodes.partiallyFilledRested : ResultCodes.rested,
      );
    }
    cancelTaker(t.limit ? "ioc" : "market-remainder", ResultCodes.remainderCancelled);
    return finish("cancelled", ResultCodes.remainderCancelled);
  }

  /**
   * The taker against the opposite side, one fill at a time: the best maker (price, then
   * FIFO) as the book stands after the last fill, with self-trade prevention. True when
   * self-trade prevention stopped the taker.
   */
  private sweepBook(t: Taker, run: Run, emit: Emit): boolean {
    const { stp, quoteSized } = t;
    const priceText = t.limit ? text(t.price) : "0";
    // Nothing joins the opposite side while the taker sweeps it: its makers are the ones there
    // now, less those that left, in the order their prices and sequences say after each fill.
    let makers = this.makersFor(t);
    const better = (a: RefOrder, b: RefOrder) =>
      (t.side === "bid" ? a.price.cmp(b.price) : b.price.cmp(a.price)) || a.seq - b.seq;
    for (;;) {
      makers = makers.filter((o) => !this.finished.has(o.id));
      const m = makers.reduce<RefOrder | undefined>(
        (best, o) => (best === undefined || better(o, best) < 0 ? o : best),
        undefined,
      );
      if (m === undefined || !this.crosses(t, m)) return false;
      if (stp !== "none" && m.userId === t.userId) {
        if (stp !== "cancel-taker") this.cancelOrder(m, "stp", emit, ResultCodes.stpCancelled);
        if (stp !== "cancel-maker") return true;
        continue;
      }
      let fill: Dec;
      if (quoteSized) {
        // What the budget left affords here; nothing: the taker can take no more (a later
        // maker costs no less).
        const affordable = run.budget.div(m.price).toDecimalPlaces(m.ad, Decimal.ROUND_DOWN);
        fill = Decimal.min(affordable, m.remaining);
        if (fill.isZero()) return false;
      } else {
        fill = Decimal.min(run.remaining, m.remaining);
      }
      // The quote rounds in the book's favour: a resting ask is paid at least its price, a
      // resting bid pays at most its price.
      const quote = m.price
        .times(fill)
        .toDecimalPlaces(m.qd, m.side === "ask" ? Decimal.ROUND_UP : Decimal.ROUND_DOWN);
      m.remaining = m.remaining.minus(fill);
      run.executed = run.executed.plus(fill);
      run.trades.push(m.price);
      if (quoteSized) run.budget = run.budget.minus(quote);
      else run.remaining = run.remaining.minus(fill);
      // An iceberg whose part shown filled, with more hidden, shows its next part: updated,
      // not filled.
      const refreshes = m.remaining.isZero() && m.hidden.gt(0);
      const makerDone = m.remaining.isZero() && !refreshes;
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
        // An iceberg's: what it hides, before its next part shows.
        hiddenVolume: m.display === undefined ? undefined : text(m.hidden),
      });
      const done = quoteSized ? run.budget.isZero() : run.remaining.isZero();
      if (done) {
        emit("order.filled.v1", {
          orderId: t.id,
          userId: t.userId,
          pairId: m.pairId,
          side: t.side,
          role: "taker",
          price: priceText,
          volume: "0",
          volumeTotal: text(t.volumeTotal),
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
        takerOrderId: t.id,
        takerUserId: t.userId,
        takerSide: t.side,
        timestamp: t.timestamp,
      });
      if (refreshes) {
        // The next part: last in its level, a new sequence.
        const shown = Decimal.min(m.display!, m.hidden);
        m.remaining = shown;
        m.hidden = m.hidden.minus(shown);
        m.seq = this.seq++;
        this.emitRested(m, emit);
      }
      // A list's leg that fills, even partly, cancels the other.
      this.breakLink(m, emit);
      if (done) return false;
    }
  }

  /**
   * Whether a fill-or-kill taker fills whole: docs/orders.md's "fills completely or not at
   * all", asked of the sweep itself, which runs on copies and leaves everything as it was.
   * With `fok-walk`, as the engine asks it: the volumes along the book, shown and hidden, one
   * leg of a list, stopping at self-trade prevention as the sweep would at its first meeting.
   */
  private fokFills(t: Taker): boolean {
    if (this.quirks.has("fok-walk")) {
      let available = new Decimal(0);
      const legs = new Set<string>();
      for (const m of this.makersFor(t)) {
        if (!this.crosses(t, m)) return false;
        if (t.stp !== "none" && m.userId === t.userId) {
          if (t.stp === "cancel-maker") continue;
          return false;
        }
        if (m.linked !== undefined) {
          if (legs.has(m.linked)) continue;
          legs.add(m.id);
        }
        available = available.plus(unfilledOf(m));
        if (available.gte(t.volume)) return true;
      }
      return false;
    }
    const saved = { orders: this.orders, stops: this.stops, finished: this.finished };
    const seq = this.seq;
    this.orders = this.orders.map((o) => ({ ...o }));
    this.stops = this.stops.map((s) => ({ ...s }));
    this.finished = new Set(this.finished);
    try {
      const run: Run = {
        remaining: t.volume,
        budget: t.quoteVolume,
        executed: new Decimal(0),
        trades: [],
      };
      this.sweepBook(t, run, () => {});
      return run.remaining.isZero();
    } finally {
      this.orders = saved.orders;
      this.stops = saved.stops;
      this.finished = saved.finished;
      this.seq = seq;
    }
  }

  /** A resting order's order.rested.v1: a taker's remainder, or an iceberg's next part. */
  private emitRested(o: RefOrder, emit: Emit): void {
    emit("order.rested.v1", {
      orderId: o.id,
      userId: o.userId,
      pairId: o.pairId,
      side: o.side,
      price: text(o.price),
      volume: text(o.remaining),
      volumeTotal: text(o.volumeTotal),
      executedVolume: text(o.volumeTotal.minus(unfilledOf(o))),
      timestamp: o.timestamp,
      stp: o.stp,
      ...(o.expireAt === undefined ? {} : { expireAt: o.expireAt }),
      ...(o.display === undefined
        ? {}
        : { displayVolume: text(o.display), hiddenVolume: text(o.hidden) }),
    } satisfies OrderRestedPayload);
  }

  // --- triggering -------------------------------------------------------------------------

  /**
   * After a taker finished with `trades` on `pairId`: triggers the stops they reach, emits
   * order.triggered.v1 for each at once, then executes them first triggered first, each
   * taker's trades triggering in turn, at most 64 in the command. Returns how many triggered.
   */
  private runTriggers(pairId: number, trades: Dec[], emit: Emit): number {
    const queue: RefStop[] = [];
    let triggered = 0;
    const trigger = (prices: Dec[]) => {
      if (prices.length === 0) return;
      const high = Decimal.max(...prices);
      const low = Decimal.min(...prices);
      const last = prices[prices.length - 1]!;
      const reached = this.stops
        .filter(
          (s) =>
            s.pairId === pairId &&
            (s.side === "bid" ? s.stopPrice.lte(high) : s.stopPrice.gte(low)),
        )
        .sort(
          (a, b) =>
            a.stopPrice.minus(last).abs().cmp(b.stopPrice.minus(last).abs()) || a.seq - b.seq,
        );
      for (const s of reached) {
        if (triggered >= MAX_TRIGGERED_STOPS) break;
        // Gone already: its list's other leg triggered first and cancelled it.
        if (!this.stops.includes(s)) continue;
        this.stops = this.stops.filter((x) => x !== s);
        triggered++;
        emit("order.triggered.v1", {
          orderId: s.id,
          userId: s.userId,
          pairId: s.pairId,
          side: s.side,
          type: s.type,
          price: text(s.price),
          stopPrice: text(s.stopPrice),
          volume: text(s.volume),
          volumeTotal: text(s.volumeTotal),
          triggerPrice: text(last),
        } satisfies StopTriggeredPayload);
        // A list's leg that triggers cancels the other at once.
        this.breakLink(s, emit);
        queue.push(s);
      }
    };
    trigger(trades);
    for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
      const quoteSized = stopQuoteSized(s);
      const outcome = this.take(
        {
          id: s.id,
          userId: s.userId,
          pairId: s.pairId,
          side: s.side,
          limit: s.type === "stop-limit",
          price: s.price,
          volume: quoteSized ? new Decimal(0) : s.volume,
          volumeTotal: s.volumeTotal,
          quoteVolume: s.quoteVolume,
          quoteSized,
          tif: s.tif,
          stp: s.stp,
          timestamp: s.timestamp,
          pd: s.pd,
          ad: s.ad,
          qd: s.qd,
          postOnly: false,
          // Triggered, a gtd stop-limit rests with the deadline it waited with.
          expireAt: s.expireAt,
        },
        emit,
        false,
      );
      trigger(outcome.trades);
    }
    return triggered;
  }

  // --- order.amend ------------------------------------------------------------------------

  private amend(ctx: Ctx<AmendOrderCommand>): RefOutcome {
    const { command, emit, reject, events } = ctx;
    const p = command.payload;
    // 1, 2.
    if (p.pairId !== command.pairId)
      return reject(ResultCodes.pairMismatch, "payload pairId differs from envelope");
    if (p.volume === undefined && p.price === undefined && p.stopPrice === undefined)
      return reject(ResultCodes.badEnvelope, "amend names none of volume, price, stopPrice");
    // 3, 4, 5.
    const order = this.orders.find((o) => o.id === p.id && o.pairId === command.pairId);
    const stop = this.stops.find((s) => s.id === p.id && s.pairId === command.pairId);
    if (!order && !stop) {
      const missing = this.missing(p.id, ctx.alreadyAccepted);
      return reject(missing.code, missing.reason);
    }
    const target = (order ?? stop)!;
    if (target.userId !== p.userId)
      return reject(ResultCodes.notOwner, "order belongs to another user");
    if (this.halts.has(command.pairId)) return reject(ResultCodes.pairHalted, "pair is halted");
    // 6: each value's decimal problems, then its zero, in the order volume, price, stopPrice.
    const given: { volume?: Dec; price?: Dec; stopPrice?: Dec } = {};
    const checks = [
      ["volume", p.volume, target.ad],
      ["price", p.price, target.pd],
      ["stopPrice", p.stopPrice, target.pd],
    ] as const;
    for (const [name, value, decimals] of checks) {
      if (value === undefined) continue;
      const v = parse(value, decimals);
      if (!(v instanceof Decimal)) return reject(v.problem, `${name}: ${v.reason}`);
      if (v.isZero()) return reject(ResultCodes.nonPositive, `${name}: zero`);
      given[name] = v;
    }
    // 7.
    if (stop && stop.type === "stop-market" && given.price)
      return reject(ResultCodes.unsupportedCombination, "a stop-market order has no price");
    if (order && given.stopPrice)
      return reject(ResultCodes.unsupportedCombination, "only stop orders have a stopPrice");
    if (stop && stopQuoteSized(stop) && given.volume)
      return reject(
        ResultCodes.unsupportedCombination,
        "a quote-sized order has no volume to amend",
      );
    if (order?.display !== undefined) return this.amendIceberg(ctx, order, given);
    // 8.
    const unfilled = order ? order.remaining : stop!.volume;
    const executed = target.volumeTotal.minus(unfilled);
    if (given.volume?.lt(executed))
      return reject(ResultCodes.amendBelowExecuted, "volume below the executed volume");
    // 9.
    const unchanged =
      (given.volume === undefined || given.volume.eq(target.volumeTotal)) &&
      (given.price === undefined || given.price.eq(target.price)) &&
      (given.stopPrice === undefined || given.stopPrice.eq(stop!.stopPrice));
    if (unchanged) {
      return {
        result: {
          commandId: command.commandId,
          status: "accepted",
          code: ResultCodes.amendUnchanged,
          codeName: resultCodeName(ResultCodes.amendUnchanged),
          orderId: target.id,
          orderStatus: order ? "rested" : "stop-accepted",
          executedVolume: "0",
          remainingVolume: text(unfilled),
          events: 0,
        },
        events,
      };
    }
    const newTotal = given.volume ?? target.volumeTotal;
    const newPrice = given.price ?? target.price;
    const newUnfilled = newTotal.minus(executed);
    const newStopPrice = stop ? (given.stopPrice ?? stop.stopPrice) : undefined;
    const taker: Taker | undefined = order && {
      id: order.id,
      userId: order.userId,
      pairId: order.pairId,
      side: order.side,
      limit: true,
      price: newPrice,
      volume: newUnfilled,
      volumeTotal: newTotal,
      quoteVolume: new Decimal(0),
      quoteSized: false,
      tif: "gtc",
      stp: order.stp,
      timestamp: order.timestamp,
      pd: order.pd,
      ad: order.ad,
      qd: order.qd,
      postOnly: order.postOnly,
      // An amend keeps the deadline, also when the order re-matches and rests again, and the
      // link, unless it trades.
      expireAt: order.expireAt,
      listId: order.listId,
      linked: order.linked,
    };
    const best = taker && this.makersFor(taker)[0];
    const wouldTake = taker !== undefined && best !== undefined && this.crosses(taker, best);
    // 10.
    if (order?.postOnly && wouldTake)
      return reject(ResultCodes.postOnlyWouldTake, "post-only order would take");

    const priorityKept =
      newPrice.eq(target.price) &&
      (stop === undefined || newStopPrice!.eq(stop.stopPrice)) &&
      newTotal.lte(target.volumeTotal);
    const terms = (price: Dec, volume: Dec, volumeTotal: Dec, stopPrice: Dec | undefined) => ({
      price: text(price),
      volume: text(volume),
      volumeTotal: text(volumeTotal),
      ...(stopPrice === undefined ? {} : { stopPrice: text(stopPrice) }),
    });
    emit("order.amended.v1", {
      orderId: target.id,
      userId: target.userId,
      pairId: target.pairId,
      side: target.side,
      type: order ? "limit" : stop!.type,
      priorityKept,
      before: terms(target.price, unfilled, target.volumeTotal, stop?.stopPrice),
      after: terms(newPrice, newUnfilled, newTotal, newStopPrice),
      executedVolume: text(executed),
    } satisfies OrderAmendedPayload);
    const accepted = (orderStatus: OrderStatus, remaining: Dec): RefOutcome => ({
      result: {
        commandId: command.commandId,
        status: "accepted",
        code: 0,
        codeName: "ok",
        orderId: target.id,
        orderStatus,
        executedVolume: "0",
        remainingVolume: text(remaining),
        events: events.length,
      },
      events,
    });

    // Down to the executed volume: the order finishes, the part taken off cancelled.
    if (given.volume !== undefined && newUnfilled.isZero()) {
      if (order) this.orders = this.orders.filter((o) => o !== order);
      else this.stops = this.stops.filter((s) => s !== stop);
      this.finished.add(target.id);
      const cancelled: OrderCancelledPayload = {
        orderId: target.id,
        userId: target.userId,
        pairId: target.pairId,
        side: target.side,
        price: text(newPrice),
        volume: text(unfilled),
        volumeTotal: text(newTotal),
        executedVolume: text(executed),
        reason: "amend",
        code: 0,
      };
      if (newStopPrice !== undefined) cancelled.stopPrice = text(newStopPrice);
      emit("order.cancelled.v1", { ...cancelled });
      this.breakLink(target, emit);
      return accepted("filled", new Decimal(0));
    }

    if (stop) {
      stop.price = newPrice;
      stop.stopPrice = newStopPrice!;
      stop.volume = newUnfilled;
      stop.volumeTotal = newTotal;
      if (!priorityKept) stop.seq = this.seq++;
      return accepted("stop-accepted", newUnfilled);
    }

    if (wouldTake) {
      // Re-matched as an incoming GTC limit order, with the order's own STP mode.
      this.orders = this.orders.filter((o) => o !== order);
      const outcome = this.take(taker!, emit, true);
      // A list's leg that traded as it re-matched, or that self-trade prevention cancelled,
      // cancels the other, as a fill or a cancel does.
      const rested = this.orders.find((o) => o.id === order!.id);
      // Its other leg, met while it re-matched (traded with, or cancelled by self-trade
      // prevention), ended the list: it goes on unlinked, as any taker (docs/orders.md).
      const partner = rested?.linked;
      if (
        rested !== undefined &&
        partner !== undefined &&
        !this.orders.some((o) => o.id === partner) &&
        !this.stops.some((s) => s.id === partner)
      ) {
        rested.linked = undefined;
        rested.listId = undefined;
      }
      if (outcome.trades.length > 0 || rested === undefined) this.breakLink(rested ?? order!, emit);
      const triggered = this.runTriggers(taker!.pairId, outcome.trades, emit);
      return this.takerResult(command.commandId, target.id, outcome, events, triggered);
    }
    order!.price = newPrice;
    order!.remaining = newUnfilled;
    order!.volumeTotal = newTotal;
    if (!priorityKept) order!.seq = this.seq++;
    return accepted("rested", newUnfilled);
  }

  /**
   * An iceberg's amend, past the checks every amend runs: only a lower volume, which keeps its
   * priority and comes off the hidden part first, then off the part shown.
   */
  private amendIceberg(
    ctx: Ctx<AmendOrderCommand>,
    order: RefOrder,
    given: { volume?: Dec; price?: Dec },
  ): RefOutcome {
    const { command, emit, reject, events } = ctx;
    const newTotal = given.volume ?? order.volumeTotal;
    if (
      (given.price !== undefined && !given.price.eq(order.price)) ||
      newTotal.gt(order.volumeTotal)
    )
      return reject(
        ResultCodes.unsupportedCombination,
        "an iceberg's amend may only lower its volume: cancel and place instead",
      );
    const before = unfilledOf(order);
    const executed = order.volumeTotal.minus(before);
    if (newTotal.lt(executed))
      return reject(ResultCodes.amendBelowExecuted, "volume below the executed volume");
    const result = (code: number, orderStatus: OrderStatus, remaining: Dec): RefOutcome => ({
      result: {
        commandId: command.commandId,
        status: "accepted",
        code,
        codeName: resultCodeName(code),
        orderId: order.id,
        orderStatus,
        executedVolume: "0",
        remainingVolume: text(remaining),
        events: events.length,
      },
      events,
    });
    if (newTotal.eq(order.volumeTotal)) return result(ResultCodes.amendUnchanged, "rested", before);
    const terms = (o: { remaining: Dec; hidden: Dec }, volumeTotal: Dec) => ({
      price: text(order.price),
      volume: text(o.remaining),
      volumeTotal: text(volumeTotal),
      hiddenVolume: text(o.hidden),
    });
    const left = newTotal.minus(executed);
    const off = before.minus(left);
    const after = off.lte(order.hidden)
      ? { remaining: order.remaining, hidden: order.hidden.minus(off) }
      : { remaining: left, hidden: new Decimal(0) };
    emit("order.amended.v1", {
      orderId: order.id,
      userId: order.userId,
      pairId: order.pairId,
      side: order.side,
      type: "limit",
      priorityKept: true,
      before: terms(order, order.volumeTotal),
      after: terms(after, newTotal),
      executedVolume: text(executed),
    } satisfies OrderAmendedPayload);
    if (left.isZero()) {
      // Down to the executed volume: finished as a plain order is, the part taken off (shown
      // and hidden) cancelled.
      this.orders = this.orders.filter((o) => o !== order);
      this.finished.add(order.id);
      emit("order.cancelled.v1", {
        orderId: order.id,
        userId: order.userId,
        pairId: order.pairId,
        side: order.side,
        price: text(order.price),
        volume: text(before),
        volumeTotal: text(newTotal),
        executedVolume: text(executed),
        reason: "amend",
        code: 0,
      } satisfies OrderCancelledPayload);
      this.breakLink(order, emit);
      return result(ResultCodes.ok, "filled", left);
    }
    order.volumeTotal = newTotal;
    order.remaining = after.remaining;
    order.hidden = after.hidden;
    return result(ResultCodes.ok, "rested", left);
  }

  // --- order.cancel-all -------------------------------------------------------------------

  private cancelAll(ctx: Ctx<CancelAllCommand>): RefOutcome {
    const { command, emit, reject, events } = ctx;
    const p = command.payload;
    if (p.pairId !== undefined && p.pairId !== command.pairId)
      return reject(ResultCodes.pairMismatch, "payload pairId differs from envelope");
    const targets = this.usersOrders(p.userId, p.pairId);
    const chosen = targets.slice(0, MAX_CANCEL_ALL);
    // A list's other leg went with the first (reason oco): counted, not cancelled twice. One
    // past the bound goes with its first too.
    for (const t of chosen) this.cancelTarget(t, "cancel-all", emit);
    const code = targets.length > MAX_CANCEL_ALL ? ResultCodes.cancelAllPartial : ResultCodes.ok;
    return {
      result: {
        commandId: command.commandId,
        status: "accepted",
        code,
        codeName: resultCodeName(code),
        cancelledOrders: chosen.length,
        events: events.length,
      },
      events,
    };
  }

  /**
   * Every resting order and stop of a user, of one pair or of all: pairs ascending; in a
   * pair the resting orders in book order, then its stops by arrival.
   */
  private usersOrders(userId: string, pairId?: number): Target[] {
    const inScope = (x: { userId: string; pairId: number }) =>
      x.userId === userId && (pairId === undefined || x.pairId === pairId);
    const pairs = [
      ...new Set(
        [...this.orders.filter(inScope), ...this.stops.filter(inScope)].map((x) => x.pairId),
      ),
    ].sort((a, b) => a - b);
    const targets: Target[] = [];
    for (const pair of pairs) {
      const orders = this.orders.filter((o) => inScope(o) && o.pairId === pair).sort(bookOrder);
      const stops = this.stops
        .filter((s) => inScope(s) && s.pairId === pair)
        .sort((a, b) => a.seq - b.seq);
      targets.push(...orders.map((order) => ({ order })), ...stops.map((stop) => ({ stop })));
    }
    return targets;
  }

  /** Cancels a target still live; one a list's other leg took with it is gone already. */
  private cancelTarget(t: Target, reason: CancelReason, emit: Emit): void {
    if ("order" in t) {
      if (this.orders.includes(t.order)) this.cancelOrder(t.order, reason, emit);
    } else if (this.stops.includes(t.stop)) this.cancelStop(t.stop, reason, emit);
  }

  // --- session.cancel-after ---------------------------------------------------------------

  private cancelAfter(ctx: Ctx<CancelAfterCommand>): RefOutcome {
    const { command, reject, events } = ctx;
    const { userId, timeoutMs } = command.payload;
    // 0, or a second to a day, in whole milliseconds. The envelope's pairId only names the
    // partition, so no pair check and no halt check: a halted pair's orders go too.
    const inRange = timeoutMs >= MIN_CANCEL_AFTER && timeoutMs <= MAX_CANCEL_AFTER;
    if (!Number.isSafeInteger(timeoutMs) || (timeoutMs !== 0 && !inRange))
      return reject(
        ResultCodes.badTimeout,
        `timeoutMs must be 0 (disarm) or ${MIN_CANCEL_AFTER}..${MAX_CANCEL_AFTER}`,
      );
    const result: CommandResult = {
      commandId: command.commandId,
      status: "accepted",
      code: 0,
      codeName: "ok",
      events: events.length, // none: the switch has no event until it fires
    };
    const sessionChanges: SessionChange[] = [];
    if (timeoutMs === 0) {
      // Disarms the switch, if one is armed; a sweep under way goes on.
      if (this.armedSwitches.delete(userId)) sessionChanges.push({ op: "switch-remove", userId });
    } else {
      // From the engine's time; a renewal replaces the deadline.
      const deadline = this.time + timeoutMs;
      this.armedSwitches.set(userId, deadline);
      sessionChanges.push({ op: "switch-put", userId, deadline });
      result.triggerAt = deadline;
    }
    return { result, events, sessionChanges };
  }

  /** A switch fires: its event on the partition, and the user's sweep begins. */
  private fire(userId: string, deadline: number, emit: Emit, changes: SessionChange[]): void {
    this.armedSwitches.delete(userId);
    changes.push({ op: "switch-remove", userId });
    emit("session.triggered.v1", {
      userId,
      triggerAt: deadline,
    } satisfies SessionTriggeredPayload);
    this.pendingSweeps.set(userId, deadline);
    changes.push({ op: "sweep-put", userId, deadline });
  }

  /**
   * Cancels the orders and stops of the users whose switch fired, earliest deadline first
   * (then user id), each in cancel-all's order, at most `room` of them. A user with none
   * left ends its sweep. Returns how many it cancelled.
   */
  private sweep(room: number, emit: Emit, changes: SessionChange[]): number {
    const users = [...this.pendingSweeps].sort(
      ([a, at], [b, bt]) => at - bt || (a < b ? -1 : a > b ? 1 : 0),
    );
    let done = 0;
    for (const [userId] of users) {
      const targets = this.usersOrders(userId);
      const chosen = targets.slice(0, room - done);
      for (const t of chosen) this.cancelTarget(t, "cancel-after", emit);
      done += chosen.length;
      if (chosen.length < targets.length) return done; // the next tick goes on
      this.pendingSweeps.delete(userId);
      changes.push({ op: "sweep-remove", userId });
    }
    return done;
  }

  // --- pair.halt / pair.resume ------------------------------------------------------------

  private pairControl(ctx: Ctx<PairControlCommand>): RefOutcome {
    const { command, emit, reject, events } = ctx;
    const p = command.payload;
    if (p.pairId !== command.pairId)
      return reject(ResultCodes.pairMismatch, "payload pairId differs from envelope");
    // The reason's 1 to 200 characters are the decoder's check (decode-command.ts), as every
    // envelope shape is: apply() takes decoded commands.
    const halted = this.halts.has(p.pairId);
    if (command.type === "pair.halt") {
      if (halted) return reject(ResultCodes.pairAlreadyHalted, "pair is halted already");
      this.halts.set(p.pairId, p.reason);
    } else {
      if (!halted) return reject(ResultCodes.pairNotHalted, "pair is not halted");
      this.halts.delete(p.pairId);
    }
    emit(command.type === "pair.halt" ? "pair.halted.v1" : "pair.resumed.v1", {
      pairId: p.pairId,
      reason: p.reason,
    } satisfies PairControlEventPayload);
    return {
      result: {
        commandId: command.commandId,
        status: "accepted",
        code: 0,
        codeName: "ok",
        events: events.length,
      },
      events,
    };
  }

  // --- clock.tick -------------------------------------------------------------------------

  private tick(ctx: Ctx<ClockTickCommand>): RefOutcome {
    const { command, emit, reject, events } = ctx;
    const now = command.payload.now;
    // The engine's own guard (a tick is the conductor's, never decoded from the wire).
    if (!Number.isSafeInteger(now) || now < 0)
      return reject(ResultCodes.badEnvelope, "clock.tick: now must be epoch milliseconds");
    // Time never goes back.
    this.time = Math.max(this.time, now);
    const sessionChanges: SessionChange[] = [];
    // First the sweeps of switches that fired in earlier ticks.
    let done = this.sweep(MAX_EXPIRIES, emit, sessionChanges);
    let expired = 0;
    // Then every deadline passed, earliest first: a switch before an order at the same
    // millisecond, switches by user id, orders and stops in time priority (the current
    // sequence: an amend that lost priority or a stop-limit that rested counts from then).
    // Nothing becomes due on the way; a sweep only takes orders out.
    type Due = { at: number; userId: string } | { at: number; item: RefOrder | RefStop };
    const due: Due[] = [
      ...[...this.armedSwitches]
        .filter(([, at]) => at <= this.time)
        .map(([userId, at]) => ({ at, userId })),
      ...[...this.orders, ...this.stops]
        .filter((x) => x.expireAt !== undefined && x.expireAt <= this.time)
        .map((item) => ({ at: item.expireAt!, item })),
    ].sort((a, b) => {
      if (a.at !== b.at) return a.at - b.at;
      if ("userId" in a && "userId" in b) return a.userId < b.userId ? -1 : 1;
      if ("userId" in a) return -1;
      if ("userId" in b) return 1;
      return a.item.seq - b.item.seq;
    });
    for (const d of due) {
      if (done >= MAX_EXPIRIES) break; // the rest are due at once, in the next ticks
      if ("userId" in d) {
        this.fire(d.userId, d.at, emit, sessionChanges);
        done += this.sweep(MAX_EXPIRIES - done, emit, sessionChanges);
        continue;
      }
      const x = d.item;
      // Gone already when a switch that fired before it swept it.
      if (!this.orders.includes(x as RefOrder) && !this.stops.includes(x as RefStop)) continue;
      this.expire(x, emit);
      done++;
      expired++;
    }
    const result: CommandResult = {
      commandId: command.commandId,
      status: "accepted",
      code: 0,
      codeName: "ok",
      expiredOrders: expired,
      events: events.length,
    };
    // Orders and stops that fired switches cancelled, when there were any.
    if (done > expired) result.cancelledOrders = done - expired;
    return { result, events, sessionChanges };
  }

  private expire(x: RefOrder | RefStop, emit: Emit): void {
    const stop = "stopPrice" in x ? x : undefined;
    const unfilled = "remaining" in x ? unfilledOf(x) : x.volume;
    this.orders = this.orders.filter((o) => o !== x);
    this.stops = this.stops.filter((s) => s !== x);
    this.finished.add(x.id);
    const payload: OrderExpiredPayload = {
      orderId: x.id,
      userId: x.userId,
      pairId: x.pairId,
      side: x.side,
      price: text(x.price),
      volume: text(unfilled),
      volumeTotal: text(x.volumeTotal),
      executedVolume: text(x.volumeTotal.minus(unfilled)),
      expireAt: x.expireAt!,
    };
    if (stop && stopQuoteSized(stop)) payload.quoteVolume = text(stop.quoteVolume);
    if (stop) payload.stopPrice = text(stop.stopPrice);
    // Each in its own pair's envelope: a tick spans the partition's pairs.
    emit("order.expired.v1", { ...payload }, x.pairId);
    this.breakLink(x, emit);
  }

  // --- views ------------------------------------------------------------------------------

  /** The engine's time as the ticks set it. */
  now(): number {
    return this.time;
  }

  /**
   * When the next tick has work: the earliest deadline of a live good-till-date order or stop
   * or of an armed switch; while a fired switch's sweep is unfinished, the engine's time stands
   * for the switches (its orders are due at once); undefined: none.
   */
  nextExpiry(): number | undefined {
    const deadlines = [...this.orders, ...this.stops]
      .map((x) => x.expireAt)
      .filter((at): at is number => at !== undefined);
    if (this.pendingSweeps.size > 0) deadlines.push(this.time);
    else deadlines.push(...this.armedSwitches.values());
    return deadlines.length === 0 ? undefined : Math.min(...deadlines);
  }

  /** Armed dead-man's switches, [userId, deadline], by user id. */
  switches(): [string, number][] {
    return [...this.armedSwitches].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Fired switches whose users still have orders to cancel, [userId, deadline], by user id. */
  sweeps(): [string, number][] {
    return [...this.pendingSweeps].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  restingCount(): number {
    return this.orders.length;
  }

  stopCount(): number {
    return this.stops.length;
  }

  isHalted(pairId: number): boolean {
    return this.halts.has(pairId);
  }

  /** Live resting orders, then stops, in arrival order. */
  liveOrders(): RefLiveOrder[] {
    const resting = [...this.orders]
      .sort((a, b) => a.seq - b.seq)
      .map((o): RefLiveOrder => {
        const unfilled = unfilledOf(o);
        const live: RefLiveOrder = {
          id: o.id,
          userId: o.userId,
          pairId: o.pairId,
          side: o.side,
          kind: "limit",
          price: text(o.price),
          volumeTotal: text(o.volumeTotal),
          volume: text(unfilled),
          executed: text(o.volumeTotal.minus(unfilled)),
          quoteSized: false,
          postOnly: o.postOnly,
          stp: o.stp,
        };
        if (o.expireAt !== undefined) live.expireAt = o.expireAt;
        if (o.display !== undefined) {
          live.displayVolume = text(o.display);
          live.hiddenVolume = text(o.hidden);
        }
        return withLink(live, o);
      });
    const stops = [...this.stops]
      .sort((a, b) => a.seq - b.seq)
      .map((s): RefLiveOrder => {
        const live: RefLiveOrder = {
          id: s.id,
          userId: s.userId,
          pairId: s.pairId,
          side: s.side,
          kind: s.type,
          price: text(s.price),
          stopPrice: text(s.stopPrice),
          volumeTotal: text(s.volumeTotal),
          volume: text(s.volume),
          executed: text(s.volumeTotal.minus(s.volume)),
          quoteSized: stopQuoteSized(s),
          postOnly: false,
          stp: s.stp,
        };
        if (s.expireAt !== undefined) live.expireAt = s.expireAt;
        return withLink(live, s);
      });
    return [...resting, ...stops];
  }

  /**
   * A pair's depth as the book query reads it: each side's levels best first, with the volume
   * shown (an iceberg's hidden part is not in the book) and the orders there.
   */
  depth(pairId: number): { bids: DepthLevel[]; asks: DepthLevel[] } {
    const side = (s: Side): DepthLevel[] => {
      const levels: DepthLevel[] = [];
      const orders = this.orders.filter((o) => o.pairId === pairId && o.side === s).sort(bookOrder);
      for (const o of orders) {
        const last = levels.at(-1);
        if (last !== undefined && new Decimal(last.price).eq(o.price)) {
          last.volume = text(new Decimal(last.volume).plus(o.remaining));
          last.orders++;
        } else levels.push({ price: text(o.price), volume: text(o.remaining), orders: 1 });
      }
      return levels;
    };
    return { bids: side("bid"), asks: side("ask") };
  }

  /** The best resting price of one side of a pair. */
  bestPrice(pairId: number, side: Side): string | undefined {
    const prices = this.orders.filter((o) => o.pairId === pairId && o.side === side);
    if (prices.length === 0) return undefined;
    const best = prices
      .map((o) => o.price)
      .reduce((a, b) => (side === "bid" ? Decimal.max(a, b) : Decimal.min(a, b)));
    return text(best);
  }

  digest(): string {
    const sorted = [...this.orders].sort((a, b) => a.pairId - b.pairId || bookOrder(a, b));
    const orders = sorted.map((o): DigestOrder => {
      const order: DigestOrder = {
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
      };
      if (o.postOnly) order.postOnly = true;
      if (o.expireAt !== undefined) order.expireAt = o.expireAt;
      if (o.display !== undefined) {
        order.displayVolume = text(o.display);
        order.hiddenVolume = text(o.hidden);
      }
      return withLink(order, o);
    });
    const stops = [...this.stops]
      .sort((a, b) => a.pairId - b.pairId || a.seq - b.seq)
      .map((s): DigestStop => {
        const stop: DigestStop = {
          id: s.id,
          userId: s.userId,
          pairId: s.pairId,
          side: s.side,
          type: s.type,
          price: text(s.price),
          stopPrice: text(s.stopPrice),
          volume: text(s.volume),
          volumeTotal: text(s.volumeTotal),
          quoteVolume: text(s.quoteVolume),
          timeInForce: s.tif,
          stp: s.stp,
          timestamp: s.timestamp,
          priceDecimals: s.pd,
          amountDecimals: s.ad,
          quoteDecimals: s.qd,
        };
        if (s.expireAt !== undefined) stop.expireAt = s.expireAt;
        return withLink(stop, s);
      });
    const halts = [...this.halts]
      .sort(([a], [b]) => a - b)
      .map(([pairId, reason]) => ({ pairId, reason }));
    return digestBooks(orders, stops, halts, {
      switches: this.armedSwitches,
      sweeps: this.pendingSweeps,
    });
  }
}

/** A linked leg's link onto its view, as the engine's views and the digest name it. */
function withLink<T extends { listId?: string; linkedOrderId?: string }>(
  view: T,
  leg: { listId?: string; linked?: string },
): T {
  if (leg.linked !== undefined) {
    view.listId = leg.listId;
    view.linkedOrderId = leg.linked;
  }
  return view;
}

/** An order or stop a cancel-all or a sweep takes out. */
type Target = { order: RefOrder } | { stop: RefStop };

interface Ctx<C extends CommandEnvelope> {
  command: C;
  alreadyAccepted: boolean;
  emit: Emit;
  reject: (code: number, reason: string) => RefOutcome;
  events: EventEnvelope[];
}
