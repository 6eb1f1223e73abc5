// Deterministic benchmark workloads: seeded generators of complete command envelopes with
// UUID-shaped ids and timestamps derived from a fixed epoch, so two runs get byte-identical input.

import type {
  AmendOrderPayload,
  CommandEnvelope,
  OrderKind,
  PlaceOrderPayload,
  Side,
} from "../domain/index";
import { exchange } from "./workload-exchange";

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
}

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

/** Pair ids owned by a partition: pairId mod partitionCount == partition, pairId >= 1. */
function partitionPairIds(partition: number, partitionCount: number, count: number): number[] {
  const ids: number[] = [];
  for (
    let pairId = partition === 0 ? partitionCount : partition;
    ids.length < count;
    pairId += partitionCount
  ) {
    ids.push(pairId);
  }
  return ids;
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
    return { ...base, type: "order.place", payload };
  }

  cancelAll(stream: number, index: number, pairId: number, userId: string): CommandEnvelope {
    const { ms: _ms, ...base } = this.envelopeBase(stream, index, pairId);
    return { ...base, type: "order.cancel-all", payload: { userId, pairId } };
  }

  amend(stream: number, index: number, payload: AmendOrderPayload): CommandEnvelope {
    const { ms: _ms, ...base } = this.envelopeBase(stream, index, payload.pairId);
    return { ...base, type: "order.amend", payload };
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

export function createWorkload(name: string, options: WorkloadOptions = {}): Workload {
  const { seed = 1, partition = 0, partitionCount = 1, pairs = 8 } = options;
  const factory = new CommandFactory(seed, partition);
  // join builds a flat string; a template literal would build a rope that the engine's id
  // lookup then has to flatten inside the timed region, unlike ids parsed from JSON.
  const orderId = (stream: number, index: number) => ["o", seed, stream, index].join("-");
  switch (name) {
    case "alternating":
      return alternating(factory, partitionPairIds(partition, partitionCount, 1)[0]!, orderId);
    case "mixed":
      return mixed(factory, partitionPairIds(partition, partitionCount, 1)[0]!, seed, orderId);
    case "sweep":
      return sweep(factory, partitionPairIds(partition, partitionCount, 1)[0]!, orderId);
    case "multi-pair":
      return multiPair(factory, partitionPairIds(partition, partitionCount, pairs), seed, orderId);
    case "exchange":
      return exchange(factory, partitionPairIds(partition, partitionCount, 1)[0]!, seed, orderId);
    default:
      throw new Error(`unknown workload ${name}; known: ${workloadNames.join(", ")}`);
  }
}

export type OrderIdOf = (stream: number, index: number) => string;

function alternating(factory: CommandFactory, pairId: number, orderId: OrderIdOf): Workload {
  return {
    name: "alternating",
    description: `limit bid then limit ask at 100, volume 1, pair ${pairId}; every ask fills the bid`,
    pairIds: [pairId],
    prefill: () => [],
    next: (i) =>
      factory.place(STREAM_TIMED, i, {
        id: orderId(STREAM_TIMED, i),
        userId: i % 2 === 0 ? "u-bid" : "u-ask",
        side: i % 2 === 0 ? "bid" : "ask",
        type: "limit",
        pairId,
        price: "100",
        volume: "1",
      }),
    // Couples of 4 events; an odd last bid rests with 1.
    expectedAfter: (commands) => ({ events: 2 * commands - (commands % 2), resting: commands % 2 }),
  };
}

export const MIXED_MID = 10_000;
export const priceText = (cents: number) => (cents / 100).toFixed(2);
export const volumeText = (hundredths: number) => (hundredths / 100).toFixed(2);

function mixed(
  factory: CommandFactory,
  pairId: number,
  seed: number,
  orderId: OrderIdOf,
): Workload {
  const random = mulberry32(seed ^ 0x3c6ef372);
  const pendingCancels: { id: string; userId: string }[] = [];
  const CANCEL_DELAY = 100;
  return {
    name: "mixed",
    description:
      "placements 10% post-only, 70% limit, 20% market, 50% buy; 20% of the limits are cancelled " +
      "once 100 newer cancels wait (~700 commands later), on top of the placements; " +
      "prefilled with 10,000 orders on 1,000 levels (500 per side, 10 per level)",
    pairIds: [pairId],
    prefill: () => prefillLevels(factory, pairId, seed, orderId),
    next: (i) => {
      if (pendingCancels.length > CANCEL_DELAY) {
        const target = pendingCancels.shift()!;
        return factory.cancel(STREAM_TIMED, i, pairId, target.id, target.userId);
      }
      const kind = random();
      const side: Side = random() < 0.5 ? "bid" : "ask";
      const userId = `u${Math.floor(random() * 1000)}`;
      const id = orderId(STREAM_TIMED, i);
      if (kind < 0.2) {
        return factory.place(STREAM_TIMED, i, {
          id,
          userId,
          side,
          type: "market",
          pairId,
          price: "0",
          volume: volumeText(1 + Math.floor(random() * 300)),
        });
      }
      const postOnly = kind < 0.3;
      // Post-only orders sit behind the touch; plain limits straddle it and often match.
      const offset = postOnly ? 1 + Math.floor(random() * 200) : Math.floor(random() * 300) - 100;
      const cents = side === "bid" ? MIXED_MID - offset : MIXED_MID + offset;
      if (!postOnly && random() < 0.2) pendingCancels.push({ id, userId });
      return factory.place(STREAM_TIMED, i, {
        id,
        userId,
        side,
        type: "limit",
        pairId,
        price: priceText(cents),
        volume: volumeText(1 + Math.floor(random() * 500)),
        postOnly,
      });
    },
  };
}

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

const SWEEP_LEVELS = 100;

function sweep(factory: CommandFactory, pairId: number, orderId: OrderIdOf): Workload {
  // Each cycle: 100 limit asks on 100 levels, then one market bid for their total volume.
  const refill = (i: number): CommandEnvelope => {
    const level = i % (SWEEP_LEVELS + 1);
    return factory.place(STREAM_TIMED, i, {
      id: orderId(STREAM_TIMED, i),
      userId: "u-maker",
      side: "ask",
      type: "limit",
      pairId,
      price: priceText(10_001 + level),
      volume: "1",
    });
  };
  return {
    name: "sweep",
    description:
      "cycles of 100 limit asks on 100 levels, then a market bid of 100 that exhausts them",
    pairIds: [pairId],
    prefill: () => [],
    next: (i) =>
      i % (SWEEP_LEVELS + 1) < SWEEP_LEVELS
        ? refill(i)
        : factory.place(STREAM_TIMED, i, {
            id: orderId(STREAM_TIMED, i),
            userId: "u-taker",
            side: "bid",
            type: "market",
            pairId,
            price: "0",
            volume: String(SWEEP_LEVELS),
          }),
    // A cycle: each ask rests (1 event); the market bid fills all of them (maker filled and a
    // deal per ask, then the taker filled), and the book is empty again.
    expectedAfter: (commands) => {
      const cycles = Math.floor(commands / (SWEEP_LEVELS + 1));
      const asksSince = commands % (SWEEP_LEVELS + 1);
      return {
        events: cycles * (SWEEP_LEVELS + 2 * SWEEP_LEVELS + 1) + asksSince,
        resting: asksSince,
      };
    },
  };
}

function multiPair(
  factory: CommandFactory,
  pairIds: number[],
  seed: number,
  orderId: OrderIdOf,
): Workload {
  const random = mulberry32(seed ^ 0x2545f491);
  // Zipf-like popularity: pair k (1-based) is chosen with weight 1/k.
  const weights = pairIds.map((_, k) => 1 / (k + 1));
  const sum = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let running = 0;
  for (const w of weights) {
    running += w / sum;
    cumulative.push(running);
  }
  const nextSide = new Map<number, Side>();
  return {
    name: "multi-pair",
    description: `alternating bid/ask per pair over ${pairIds.length} pairs with 1/k (zipf-like) popularity`,
    pairIds,
    prefill: () => [],
    next: (i) => {
      const r = random();
      let k = cumulative.findIndex((c) => r < c);
      if (k < 0) k = pairIds.length - 1;
      const pairId = pairIds[k]!;
      const side = nextSide.get(pairId) ?? "bid";
      nextSide.set(pairId, side === "bid" ? "ask" : "bid");
      return factory.place(STREAM_TIMED, i, {
        id: orderId(STREAM_TIMED, i),
        userId: side === "bid" ? "u-bid" : "u-ask",
        side,
        type: "limit",
        pairId,
        price: "100",
        volume: "1",
      });
    },
    // Each pair alternates on its own: one left with an unmatched bid (its next side is ask)
    // holds one resting order, whose command emitted 1 event instead of 2.
    expectedAfter: (commands) => {
      let resting = 0;
      for (const side of nextSide.values()) if (side === "ask") resting++;
      return { events: 2 * commands - resting, resting };
    },
  };
}
