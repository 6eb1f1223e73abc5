// Shared domain types: commands in, resting orders, events and book changes out.
// They mirror the wire contract (shared/contract.md); names there are fixed, so these are too.

export type Side = "bid" | "ask";
export type OrderKind = "limit" | "market" | StopKind;
/** Orders that wait in the stop book until a trade reaches their stopPrice (docs/orders.md). */
export type StopKind = "stop-limit" | "stop-market";
/**
 * "gtc" is the default for limit orders; market orders always behave as IOC unless "fok".
 * "gtd" rests like "gtc" until the order's expireAt (docs/orders.md).
 */
export type TimeInForce = "gtc" | "ioc" | "fok" | "gtd";
/** Self-trade prevention, decided by the taker's mode; "none" keeps today's behaviour. */
export type StpMode = "none" | "cancel-taker" | "cancel-maker" | "cancel-both";

export interface PlaceOrderPayload {
  id: string;
  userId: string;
  side: Side;
  type: OrderKind;
  pairId: number;
  timestamp: number;
  price: string;
  volume: string;
  volumeTotal: string;
  quoteVolume: string;
  priceDecimals: number;
  amountDecimals: number;
  quoteDecimals: number;
  role?: string;
  timeInForce?: TimeInForce;
  postOnly?: boolean;
  stp?: StpMode;
  /** Required for stop orders; ignored (as today) on limit and market orders. */
  stopPrice?: string;
  /** Epoch milliseconds; required with timeInForce "gtd" and refused without it. */
  expireAt?: number;
  /** An iceberg: the volume shown at a time (a GTC or GTD limit order only). */
  displayVolume?: string;
}

export interface CancelOrderPayload {
  id: string;
  userId: string;
  pairId: number;
}

interface EnvelopeBase {
  schemaVersion: 1;
  commandId: string;
  correlationId: string;
  submittedAt: string;
  pairId: number;
  partition: number;
}

export interface PlaceOrderCommand extends EnvelopeBase {
  type: "order.place";
  payload: PlaceOrderPayload;
}

export interface CancelOrderCommand extends EnvelopeBase {
  type: "order.cancel";
  payload: CancelOrderPayload;
}

/** `volume` is the new total size (volumeTotal); at least one field is given. */
export interface AmendOrderPayload {
  id: string;
  userId: string;
  pairId: number;
  volume?: string;
  price?: string;
  stopPrice?: string;
}

export interface AmendOrderCommand extends EnvelopeBase {
  type: "order.amend";
  payload: AmendOrderPayload;
}

/** Without `pairId`: every pair of the partition. */
export interface CancelAllPayload {
  userId: string;
  pairId?: number;
}

export interface CancelAllCommand extends EnvelopeBase {
  type: "order.cancel-all";
  payload: CancelAllPayload;
}

export interface PairControlPayload {
  pairId: number;
  reason: string;
}

/** Operator commands: the shell authorises them before the engine sees them. */
export interface PairControlCommand extends EnvelopeBase {
  type: "pair.halt" | "pair.resume";
  payload: PairControlPayload;
}

/**
 * One-cancels-other: two orders in one command, each a limit (GTC or GTD) or a stop, of one
 * user on one pair. When either fills, even partly, triggers, or is cancelled or expires,
 * the other is cancelled in the same command (docs/orders.md).
 */
export interface PlaceOcoPayload {
  listId: string;
  userId: string;
  pairId: number;
  legs: PlaceOrderPayload[];
}

export interface PlaceOcoCommand extends EnvelopeBase {
  type: "order.place-oco";
  payload: PlaceOcoPayload;
}

/** `timeoutMs` 0 disarms; otherwise 1,000..86,400,000 (docs/orders.md). */
export interface CancelAfterPayload {
  userId: string;
  timeoutMs: number;
}

/** The dead-man's switch: the user's orders go unless another one comes within timeoutMs. */
export interface CancelAfterCommand extends EnvelopeBase {
  type: "session.cancel-after";
  payload: CancelAfterPayload;
}

/** `now`: epoch milliseconds, the time the conductor decided for its batch. */
export interface ClockTickPayload {
  now: number;
}

/**
 * The conductor's own command: time enters the engine only through it. Never decoded from
 * the wire (a producer's `clock.tick` is an unknown command type).
 */
export interface ClockTickCommand extends EnvelopeBase {
  type: "clock.tick";
  payload: ClockTickPayload;
}

/** Discriminated on `type`, so `payload` narrows without casts. */
export type CommandEnvelope =
  | PlaceOrderCommand
  | CancelOrderCommand
  | AmendOrderCommand
  | CancelAllCommand
  | PairControlCommand
  | CancelAfterCommand
  | PlaceOcoCommand
  | ClockTickCommand;

export type CommandType = CommandEnvelope["type"];

export interface RestingOrder {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  price: string;
  /** Remaining (unfilled) volume. */
  volume: string;
  volumeTotal: string;
  timestamp: number;
  /** FIFO priority inside a price level: engine-assigned and monotonic. */
  sequence: number;
  priceDecimals: number;
  amountDecimals: number;
  quoteDecimals: number;
  stp: StpMode;
  /** Present (true) only for a post-only order: an amend that would cross is then refused. */
  postOnly?: true;
  /** Present only on a good-till-date order: epoch milliseconds. */
  expireAt?: number;
  /**
   * Present only on an iceberg: the volume it shows at a time, and the unfilled volume it
   * hides (`volume` is the part shown).
   */
  displayVolume?: string;
  hiddenVolume?: string;
  /** Present only on a one-cancels-other leg: its list and the other leg's order id. */
  listId?: string;
  linkedOrderId?: string;
}

/** A stop order waiting in its pair's stop book, as the engine reports and loads it. */
export interface StopOrder {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  type: StopKind;
  /** "0" for stop-market. */
  price: string;
  stopPrice: string;
  /** "0" for a quote-sized stop-market bid. */
  volume: string;
  volumeTotal: string;
  /** "0" unless a quote-sized stop-market bid. */
  quoteVolume: string;
  timeInForce: TimeInForce;
  stp: StpMode;
  timestamp: number;
  /** Arrival order, from the same counter as resting orders' sequence. */
  sequence: number;
  priceDecimals: number;
  amountDecimals: number;
  quoteDecimals: number;
  /** Present only on a good-till-date stop: epoch milliseconds. */
  expireAt?: number;
  /** Present only on a one-cancels-other leg: its list and the other leg's order id. */
  listId?: string;
  linkedOrderId?: string;
}

export interface HaltedPair {
  pairId: number;
  reason: string;
}

export type EventType =
  | "order.rested.v1"
  | "order.filled.v1"
  | "order.updated.v1"
  | "order.cancelled.v1"
  | "deal.executed.v1"
  | "order.rejected.v1"
  | "order.stop-accepted.v1"
  | "order.triggered.v1"
  | "order.amended.v1"
  | "pair.halted.v1"
  | "pair.resumed.v1"
  | "order.expired.v1"
  | "session.triggered.v1";

export interface EventEnvelope {
  schemaVersion: 1;
  eventId: string;
  type: EventType;
  partition: number;
  pairId: number;
  commandId: string;
  correlationId: string;
  /** 0-based position of the event within its command. */
  ordinal: number;
  /** Equal to the command's submittedAt: the domain never reads a clock. */
  occurredAt: string;
  payload: Record<string, unknown>;
}

/** What the shell writes to the datastore: resting orders, stops and halts (docs/orders.md). */
export type BookChange =
  | { op: "put"; order: RestingOrder }
  | { op: "remove"; order: RestingOrder }
  | { op: "stop-put"; stop: StopOrder }
  | { op: "stop-remove"; stop: StopOrder }
  | { op: "halt"; pairId: number; reason: string }
  | { op: "resume"; pairId: number }
  | { op: "switch-put"; userId: string; deadline: number }
  | { op: "switch-remove"; userId: string }
  | { op: "sweep-put"; userId: string; deadline: number }
  | { op: "sweep-remove"; userId: string };

export type OrderStatus =
  | "rested"
  | "partially-filled-rested"
  | "filled"
  | "cancelled"
  | "rejected"
  | "stop-accepted";

export interface CommandResult {
  commandId: string;
  status: "accepted" | "rejected" | "duplicate";
  code: number;
  codeName: string;
  reason?: string;
  orderId?: string;
  orderStatus?: OrderStatus;
  executedVolume?: string;
  remainingVolume?: string;
  /** Number of events the command emitted. */
  events: number;
  /** order.cancel-all: orders and stops it cancelled. */
  cancelledOrders?: number;
  /** Stops the command's trades triggered, when any did. */
  triggeredStops?: number;
  /** clock.tick: orders and stops it expired. */
  expiredOrders?: number;
  /** session.cancel-after: when the switch fires unless renewed (absent: disarmed). */
  triggerAt?: number;
  /** order.place-oco: its list id and each leg's outcome, in the order given. */
  listId?: string;
  legs?: OcoLegResult[];
  /**
   * The engine's time when the command was applied (its batch's clock.tick), epoch ms. Set
   * by the conductor, not the domain: a replay puts each command after the ticks up to it.
   */
  transactTime?: number;
}

export interface OcoLegResult {
  orderId: string;
  code: number;
  codeName: string;
  orderStatus?: OrderStatus;
  executedVolume?: string;
  remainingVolume?: string;
}

export interface CommandOutcome {
  result: CommandResult;
  events: EventEnvelope[];
  changes: BookChange[];
  /** Set when a place command was accepted: the shell writes the accepted-order marker. */
  acceptedOrderId?: string;
  /** The second order an order.place-oco accepted (its other leg), marked the same way. */
  alsoAcceptedOrderId?: string;
}

export interface DepthLevel {
  price: string;
  volume: string;
  orders: number;
}

/** A pair's stops at one stop price, for the book query: no order or user ids. */
export interface StopDepthLevel {
  side: Side;
  stopPrice: string;
  volume: string;
  quoteVolume: string;
  orders: number;
}

export interface Depth {
  bids: DepthLevel[];
  asks: DepthLevel[];
}
