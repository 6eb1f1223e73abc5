// Event envelopes and their typed payloads; event ids are derived from the command id, the
// ordinal and the type so a republished event is recognisable downstream.

import type { EventEnvelope, EventType, Side, StopKind, StpMode, TimeInForce } from "./types";

/** Every event type of the contract, in a fixed order. */
export const eventTypes: readonly EventType[] = [
  "order.rested.v1",
  "order.filled.v1",
  "order.updated.v1",
  "order.cancelled.v1",
  "deal.executed.v1",
  "order.rejected.v1",
  "order.stop-accepted.v1",
  "order.triggered.v1",
  "order.amended.v1",
  "pair.halted.v1",
  "pair.resumed.v1",
  "order.expired.v1",
  "session.triggered.v1",
];

/**
 * `:ordinal:type` suffixes by type, then ordinal (0..63), built once so an id costs one
 * concatenation. A null-prototype object: a property read is cheaper than a Map lookup.
 */
const eventIdSuffixes: Record<string, string[] | undefined> = Object.create(null);
for (const type of eventTypes) {
  eventIdSuffixes[type] = Array.from({ length: 64 }, (_, ordinal) => `:${ordinal}:${type}`);
}

/** Deterministic event id, e.g. `3f2a…:0:order.rested.v1`. */
export function eventIdOf(commandId: string, ordinal: number, type: EventType): string {
  // An ordinal outside 0..63 (or not an integer) reads undefined and takes the general path.
  const suffix = eventIdSuffixes[type]?.[ordinal];
  return suffix === undefined ? commandId + ":" + ordinal + ":" + type : commandId + suffix;
}

export interface OrderRestedPayload {
  orderId: string;
  userId: string;
  pairId: number;
  side: Side;
  price: string;
  /** Remaining volume now resting. */
  volume: string;
  volumeTotal: string;
  /**
   * Volume of the order executed so far: volumeTotal minus the volume now resting (so it also
   * counts what a producer's volume < volumeTotal says was executed before this command). The
   * command's result reports only what this command executed.
   */
  executedVolume: string;
  timestamp: number;
  stp: StpMode;
  /** Only on a good-till-date order. */
  expireAt?: number;
  /** Only on an iceberg: the volume it shows at a time, and what it hides now. */
  displayVolume?: string;
  hiddenVolume?: string;
}

/** Payload of order.filled.v1 and order.updated.v1: one fill of one order. */
export interface OrderFillPayload {
  orderId: string;
  userId: string;
  pairId: number;
  side: Side;
  role: "maker" | "taker";
  /** The order's limit price; "0" for market orders. */
  price: string;
  /** Remaining volume after this fill ("0" when filled). */
  volume: string;
  volumeTotal: string;
  fillPrice: string;
  fillVolume: string;
  fillQuoteVolume: string;
  /** Quote budget left, only on quote-sized market bids. */
  quoteVolume?: string;
  /** Only on an iceberg maker: the unfilled volume it still hides. */
  hiddenVolume?: string;
}

export type CancelReason =
  | "user"
  | "ioc"
  | "fok"
  | "market-remainder"
  | "stp"
  | "amend"
  | "cancel-all"
  | "cancel-after"
  | "oco";

export interface OrderCancelledPayload {
  orderId: string;
  userId: string;
  pairId: number;
  side: Side;
  price: string;
  /** Volume cancelled (what was left unfilled). */
  volume: string;
  volumeTotal: string;
  executedVolume: string;
  reason: CancelReason;
  code: number;
  /** Quote budget left, only on quote-sized market bids. */
  quoteVolume?: string;
  /** Only on stop orders. */
  stopPrice?: string;
}

/** A good-till-date order or stop taken out at its expireAt by a clock.tick. */
export interface OrderExpiredPayload {
  orderId: string;
  userId: string;
  pairId: number;
  side: Side;
  price: string;
  /** Volume expired (what was left unfilled). */
  volume: string;
  volumeTotal: string;
  executedVolume: string;
  expireAt: number;
  /** Quote budget left, only on quote-sized stop-market bids. */
  quoteVolume?: string;
  /** Only on stop orders. */
  stopPrice?: string;
}

/** A user's dead-man's switch fired: every order and stop of the user goes. */
export interface SessionTriggeredPayload {
  userId: string;
  /** The deadline that passed: the last session.cancel-after's time plus its timeoutMs. */
  triggerAt: number;
}

export interface StopAcceptedPayload {
  orderId: string;
  userId: string;
  pairId: number;
  side: Side;
  type: StopKind;
  price: string;
  stopPrice: string;
  volume: string;
  volumeTotal: string;
  quoteVolume: string;
  timeInForce: TimeInForce;
  stp: StpMode;
  timestamp: number;
  /** Only on a good-till-date stop. */
  expireAt?: number;
}

export interface StopTriggeredPayload {
  orderId: string;
  userId: string;
  pairId: number;
  side: Side;
  type: StopKind;
  price: string;
  stopPrice: string;
  volume: string;
  volumeTotal: string;
  /** The last trade price of the taker whose trades triggered the stop. */
  triggerPrice: string;
}

/** An order's terms on either side of an amend; `volume` is the unfilled part. */
export interface AmendTerms {
  price: string;
  volume: string;
  volumeTotal: string;
  stopPrice?: string;
  /** An iceberg's hidden volume (its `volume` is the part shown). */
  hiddenVolume?: string;
}

export interface OrderAmendedPayload {
  orderId: string;
  userId: string;
  pairId: number;
  side: Side;
  type: "limit" | StopKind;
  priorityKept: boolean;
  before: AmendTerms;
  after: AmendTerms;
  executedVolume: string;
}

export interface PairControlEventPayload {
  pairId: number;
  reason: string;
}

export interface DealExecutedPayload {
  pairId: number;
  price: string;
  volume: string;
  /** price × volume rounded to quoteDecimals in the book's favour: up against a resting ask, down against a resting bid. */
  quoteVolume: string;
  makerOrderId: string;
  makerUserId: string;
  makerSide: Side;
  takerOrderId: string;
  takerUserId: string;
  takerSide: Side;
  timestamp: number;
}

export interface OrderRejectedPayload {
  orderId?: string;
  userId?: string;
  pairId?: number;
  commandType?: string;
  code: number;
  codeName: string;
  reason: string;
}

export type EventPayload =
  | OrderRestedPayload
  | OrderFillPayload
  | OrderCancelledPayload
  | DealExecutedPayload
  | OrderRejectedPayload
  | OrderExpiredPayload
  | SessionTriggeredPayload
  | StopAcceptedPayload
  | StopTriggeredPayload
  | OrderAmendedPayload
  | PairControlEventPayload;

/** The command fields every event of a command copies. */
export interface EventSource {
  commandId: string;
  correlationId: string;
  partition: number;
  pairId: number;
  submittedAt: string;
}

/** Collects one command's events, numbering them 0..n-1 in emission order. */
export class EventLog {
  events: EventEnvelope[] = [];

  constructor(private source: EventSource) {}

  /**
   * Starts collecting another command's events in a fresh array, so a single-threaded caller can
   * keep one log instead of allocating one per command.
   */
  reset(source: EventSource): void {
    this.source = source;
    this.events = [];
  }

  push(type: EventType, payload: EventPayload): void {
    this.pushOnPair(this.source.pairId, type, payload);
  }

  /** An event of another pair than the command's: a clock.tick expires orders of any pair. */
  pushOnPair(pairId: number, type: EventType, payload: EventPayload): void {
    const source = this.source;
    const events = this.events;
    const ordinal = events.length;
    events.push({
      schemaVersion: 1,
      eventId: eventIdOf(source.commandId, ordinal, type),
      type,
      partition: source.partition,
      pairId,
      commandId: source.commandId,
      correlationId: source.correlationId,
      ordinal,
      occurredAt: source.submittedAt,
      payload: payload as unknown as Record<string, unknown>,
    });
  }
}
