// Deterministic benchmark workloads: seeded generators of complete command envelopes with
// UUID-shaped ids and timestamps derived from a fixed epoch, so two runs get byte-identical input.

import type { CommandEnvelope, Side } from "../src/domain/index";
import { exchange } from "./workload-exchange";
import {
  CommandFactory,
  MIXED_MID,
  mulberry32,
  type OrderIdOf,
  prefillLevels,
  priceText,
  STREAM_TIMED,
  volumeText,
  type Workload,
  type WorkloadOptions,
  workloadNames,
} from "./workload-parts";

export * from "./workload-parts";

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
      return exchange(
        factory,
        partitionPairIds(partition, partitionCount, 1)[0]!,
        seed,
        orderId,
        options.clock,
      );
    default:
      throw new Error(`unknown workload ${name}; known: ${workloadNames.join(", ")}`);
  }
}

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
