/**
 * The feed's starting point: every resting order of the partition and the sequence number of
 * the last event they reflect, read in one script (atomic, so the two agree), then made
 * durable before use: under aof-replicated a marker written after the read is waited for on
 * the same connection, so nothing in the snapshot is a commit a failover could still lose.
 */

import type { Config } from "../config/schema";
import type { Side } from "../domain/types";
import { durabilityWaitMs } from "../infra/durability-policy";
import { connectionGeneration, type Valkey } from "../infra/valkey/client";
import { type DurabilityRule, writeMarkerAndWaitDurable } from "../infra/valkey/durability";
import { partitionKeys } from "../infra/valkey/keys";
import { luaScript, runScript } from "../infra/valkey/lua-script";

export interface SnapshotOrder {
  orderId: string;
  side: Side;
  price: string;
  volume: string;
}

export interface PairSnapshot {
  pairId: number;
  /** Price ascending per side, queue order within a price. */
  orders: SnapshotOrder[];
}

export interface PartitionSnapshot {
  /** The sequence number of the last event the snapshot reflects (0: none yet). */
  seq: number;
  pairs: PairSnapshot[];
  /** Halted pairs and their reasons. */
  halted: Map<number, string>;
}

/**
 * KEYS: events:sequence, halted-pairs, pairs; ARGV: the partition's key prefix. Book members
 * sort by price (the score), then by the zero-padded sequence before the id: queue order.
 * Every key it builds shares the partition's hash slot.
 */
const readBooksScript = luaScript(
  "feed-read-books",
  `
local prefix = ARGV[1]
local out = { redis.call('GET', KEYS[1]) or '0', redis.call('HGETALL', KEYS[2]) }
for _, pair in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  for _, side in ipairs({ 'bid', 'ask' }) do
    local orders = {}
    for _, member in ipairs(redis.call('ZRANGE', prefix .. 'book:' .. pair .. ':' .. side .. ':rates', 0, -1)) do
      local id = string.sub(member, string.find(member, ':', 1, true) + 1)
      local fields = redis.call('HMGET', prefix .. 'order:' .. id, 'price', 'volume')
      if fields[1] and fields[2] then
        orders[#orders + 1] = id
        orders[#orders + 1] = fields[1]
        orders[#orders + 1] = fields[2]
      end
    end
    out[#out + 1] = { pair, side, orders }
  end
end
return out
`,
);

function decode(reply: unknown): PartitionSnapshot {
  const [seq, haltPairs, ...books] = reply as [string, string[], ...[string, Side, string[]][]];
  const halted = new Map<number, string>();
  for (let i = 0; i + 1 < haltPairs.length; i += 2)
    halted.set(Number(haltPairs[i]), haltPairs[i + 1]!);
  const byPair = new Map<number, SnapshotOrder[]>();
  for (const [pair, side, flat] of books) {
    const orders = byPair.get(Number(pair)) ?? [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      orders.push({ orderId: flat[i]!, side, price: flat[i + 1]!, volume: flat[i + 2]! });
    }
    byPair.set(Number(pair), orders);
  }
  const pairs = [...byPair].map(([pairId, orders]) => ({ pairId, orders }));
  return { seq: Number(seq), pairs, halted };
}

/** Reads the partition's books; under aof-replicated returns only once they are durable. */
export async function readSnapshot(
  valkey: Valkey,
  config: Config,
  rule: DurabilityRule = {},
): Promise<PartitionSnapshot> {
  const keys = partitionKeys(config.partition);
  // The marker must cover the read: both on one connection, or the wait throws.
  const generation = connectionGeneration(valkey);
  const reply = await runScript(
    valkey,
    readBooksScript,
    [keys.eventSequence, keys.haltedPairs, keys.pairs],
    [keys.prefix],
  );
  const waitMs = durabilityWaitMs(config);
  if (waitMs !== undefined) {
    await writeMarkerAndWaitDurable(
      valkey,
      `${keys.prefix}feed-snapshot-barrier`,
      waitMs,
      rule,
      generation,
    );
  }
  return decode(reply);
}
