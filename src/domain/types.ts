// Shared domain types: commands in, resting orders, events and book changes out.
// They mirror the wire contract (shared/contract.md); names there are fixed, so these are too.

export type Side = "bid" | "ask";
export type OrderKind = "limit" | "market";
/** "gtc" is the default for limit orders; market orders always behave as IOC unless "fok". */
export type TimeInForce = "gtc" | "ioc" | "fok";
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

/** Discriminated on `type`, so `payload` narrows without casts. */
export type CommandEnvelope = PlaceOrderCommand | CancelOrderCommand;

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
}

export type EventType =
  | "order.rested.v1"
  | "order.filled.v1"
  | "order.updated.v1"
  | "order.cancelled.v1"
  | "deal.executed.v1"
  | "order.rejected.v1";

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

export type BookChange = { op: "put"; order: RestingOrder } | { op: "remove"; order: RestingOrder };

export type OrderStatus =
  | "rested"
  | "partially-filled-rested"
  | "filled"
  | "cancelled"
  | "rejected";

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
}

export interface CommandOutcome {
  result: CommandResult;
  events: EventEnvelope[];
  changes: BookChange[];
  /** Set when a place command was accepted: the shell writes the accepted-order marker. */
  acceptedOrderId?: string;
}

export interface DepthLevel {
  price: string;
  volume: string;
  orders: number;
}

export interface Depth {
  bids: DepthLevel[];
  asks: DepthLevel[];
}
