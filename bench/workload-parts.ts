// The pieces every workload is built from: the seeded PRNG, deterministic ids and timestamps,
// the command factory, and the deep-book prefill.

import type {
  AmendOrderPayload,
  ClockTickCommand,
  CommandEnvelope,
  OrderKind,
  PlaceOrderPayload,
  Side,
} from "../src/domain/index";

export type WorkloadName = "alternating" | "mixed" | "sweep" | "multi-pair" | "exchange";
export const workloadNames: readonly WorkloadName[] = [
  "alternating",
  "mixed",
  "sweep",
  "multi-pair",
  "exchange",
];

export interface WorkloadOptions {
  seed?: number;
  partition?: number;
  partitionCount?: number;
  /** Number of pairs for multi-pair (default 8). */
  pairs?: number;
  /**
   * A clock of the workload's own, for a run that applies clock.tick itself (the domain
   * bench): the exchange workload then mixes in good-till-date orders and dead-man's
   * switches. A conductor ticks by the wall clock, so pipeline runs go without one, unless
   * `--clock wall` gives them one whose expiries move to the wall clock at the send.
   */
  clock?: WorkloadClock;
}

/** Command i happens at epochMs + i * msPerCommand. */
export interface WorkloadClock {
  epochMs: number;
  msPerCommand: number;
}

/** The domain bench's clock: 1,000 commands a second from 2027-01-15 (a fixed epoch). */
export const DOMAIN_CLOCK: WorkloadClock = { epochMs: 1_800_000_000_000, msPerCommand: 1 };

export interface Workload {
  name: WorkloadName;
  description: string;
  pairIds: number[];
  /** Commands that build the starting book; run them before timing. */
  prefill(): CommandEnvelope[];
  /** The i-th timed command; stateful generators require i = 0, 1, 2, ... in order. */
  next(i: number): CommandEnvelope;
  /**
   * Events and resting orders the first `commands` commands must leave, when known exactly.
   * Stateful workloads answer for the commands generated so far: call it after them.
   */
  expectedAfter?(commands: number): { events: number; resting: number };
  /** With a clock: the clock.tick due before command i. */
  tick?(i: number): ClockTickCommand;
}

/** 2024-01-01T00:00:00Z: commands are stamped epoch + index milliseconds, never with a clock. */
const WORKLOAD_EPOCH_MS = 1_704_067_200_000;

/** mulberry32: a tiny, well-distributed 32-bit seeded PRNG returning floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mix32(a: number, b: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x7f4a7c15, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

const hex8 = (n: number): string => n.toString(16).padStart(8, "0");

/** A UUID-shaped (version 4 layout) id derived only from the seed, a stream tag and an index. */
export function deterministicUuid(seed: number, stream: number, index: number): string {
  const a = mix32(seed, stream * 0x10001 + 1);
  const b = mix32(a, index);
  const c = mix32(b, index ^ 0x5bd1e995);
  const d = mix32(c, a);
  const e = mix32(d, b);
  const hb = hex8(b);
  const hc = hex8(c);
  const hd = hex8(d);
  return `${hb}-${hc.slice(0, 4)}-4${hc.slice(5, 8)}-${(((d >>> 28) & 3) | 8).toString(16)}${hd.slice(1, 4)}-${hd.slice(4)}${hex8(e)}`;
}

export interface PlaceSpec {
  id: string;
  userId: string;
  side: Side;
  type: OrderKind;
  pairId: number;
  price: string;
  volume: string;
  quoteVolume?: string;
  postOnly?: boolean;
  stopPrice?: string;
  /** Makes the order good-till-date. */
  expireAt?: number;
  /** Makes the order an iceberg. */
  displayVolume?: string;
}

/** An order.place payload of the workloads' precisions (2, 8, 8), stamped `ms`. */
function placePayload(spec: PlaceSpec, ms: number): PlaceOrderPayload {
  const payload: PlaceOrderPayload = {
    id: spec.id,
    userId: spec.userId,
    side: spec.side,
    type: spec.type,
    pairId: spec.pairId,
    timestamp: ms,
    price: spec.price,
    volume: spec.volume,
    volumeTotal: spec.volume,
    quoteVolume: spec.quoteVolume ?? "0",
    priceDecimals: 2,
    amountDecimals: 8,
    quoteDecimals: 8,
    role: "taker",
  };
  if (spec.postOnly) payload.postOnly = true;
  if (spec.stopPrice !== undefined) payload.stopPrice = spec.stopPrice;
  if (spec.expireAt !== undefined) {
    payload.timeInForce = "gtd";
    payload.expireAt = spec.expireAt;
  }
  if (spec.displayVolume !== undefined) payload.displayVolume = spec.displayVolume;
  return payload;
}

/** Builds envelopes for one workload: ids and times come from (seed, partition, stream, index). */
export class CommandFactory {
  /**
   * The seed of the command ids, with the partition mixed in (partition 0 keeps the seed as it
   * is): two benches on two partitions of one broker share the event exchanges, and with one
   * seed their command ids, and so their event ids, would match each other's.
   */
  private readonly idSeed: number;

  constructor(
    seed: number,
    private readonly partition: number,
  ) {
    this.idSeed = partition === 0 ? seed : mix32(seed ^ 0x2f6b9a41, partition);
  }

  private envelopeBase(stream: number, index: number, pairId: number) {
    const ms = WORKLOAD_EPOCH_MS + (stream === 0 ? index : index % 1_000_000);
    return {
      schemaVersion: 1 as const,
      commandId: deterministicUuid(this.idSeed, stream, index),
      correlationId: deterministicUuid(this.idSeed, stream + 1000, index),
      submittedAt: new Date(ms).toISOString(),
      pairId,
      partition: this.partition,
      ms,
    };
  }

  place(stream: number, index: number, spec: PlaceSpec): CommandEnvelope {
    const { ms, ...base } = this.envelopeBase(stream, index, spec.pairId);
    return { ...base, type: "order.place", payload: placePayload(spec, ms) };
  }

  /** An order.place-oco of two legs, the list named after the first leg's id. */
  oco(stream: number, index: number, legs: [PlaceSpec, PlaceSpec]): CommandEnvelope {
    const { ms, ...base } = this.envelopeBase(stream, index, legs[0].pairId);
    const payload = {
      listId: `list-${legs[0].id}`,
      userId: legs[0].userId,
      pairId: legs[0].pairId,
      legs: legs.map((leg) => placePayload(leg, ms)),
    };
    return { ...base, type: "order.place-oco", payload };
  }

  cancelAll(stream: number, index: number, pairId: number, userId: string): CommandEnvelope {
    const { ms: _ms, ...base } = this.envelopeBase(stream, index, pairId);
    return { ...base, type: "order.cancel-all", payload: { userId, pairId } };
  }

  amend(stream: number, index: number, payload: AmendOrderPayload): CommandEnvelope {
    const { ms: _ms, ...base } = this.envelopeBase(stream, index, payload.pairId);
    return { ...base, type: "order.amend", payload };
  }

  /** A session.cancel-after on `pairId`'s partition. */
  cancelAfter(
    stream: number,
    index: number,
    pairId: number,
    userId: string,
    timeoutMs: number,
  ): CommandEnvelope {
    const { ms: _ms, ...base } = this.envelopeBase(stream, index, pairId);
    return { ...base, type: "session.cancel-after", payload: { userId, timeoutMs } };
  }

  /** The conductor's clock.tick at `nowMs`, as a run without a conductor applies it. */
  tick(nowMs: number): ClockTickCommand {
    return {
      schemaVersion: 1,
      commandId: `clock.tick:${this.partition}:${nowMs}`,
      correlationId: "",
      type: "clock.tick",
      submittedAt: new Date(nowMs).toISOString(),
      pairId: 0,
      partition: this.partition,
      payload: { now: nowMs },
    };
  }

  cancel(
    stream: number,
    index: number,
    pairId: number,
    id: string,
    userId: string,
  ): CommandEnvelope {
    const { ms: _ms, ...base } = this.envelopeBase(stream, index, pairId);
    return { ...base, type: "order.cancel", payload: { id, userId, pairId } };
  }
}

export const STREAM_TIMED = 0;
export const STREAM_PREFILL = 1;

export type OrderIdOf = (stream: number, index: number) => string;

export const MIXED_MID = 10_000;
export const priceText = (cents: number) => (cents / 100).toFixed(2);
export const volumeText = (hundredths: number) => (hundredths / 100).toFixed(2);

/** 10,000 limit orders on 1,000 levels around MIXED_MID (500 a side, 10 a level): a deep book. */
export function prefillLevels(
  factory: CommandFactory,
  pairId: number,
  seed: number,
  orderId: OrderIdOf,
): CommandEnvelope[] {
  const commands: CommandEnvelope[] = [];
  const prefillRandom = mulberry32(seed ^ 0x1b873593);
  for (let level = 0; level < 500; level++) {
    for (let k = 0; k < 10; k++) {
      for (const side of ["bid", "ask"] as const) {
        const index = commands.length;
        const cents = side === "bid" ? MIXED_MID - 1 - level : MIXED_MID + 1 + level;
        commands.push(
          factory.place(STREAM_PREFILL, index, {
            id: orderId(STREAM_PREFILL, index),
            userId: `u${Math.floor(prefillRandom() * 1000)}`,
            side,
            type: "limit",
            pairId,
            price: priceText(cents),
            volume: volumeText(1 + Math.floor(prefillRandom() * 500)),
          }),
        );
      }
    }
  }
  return commands;
}
