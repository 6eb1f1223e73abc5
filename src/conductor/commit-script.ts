/**
 * The Lua script that commits one batch atomically and fenced: it refuses to write
 * unless the partition's owner epoch is still the committing conductor's, then applies
 * the batch's writes. Kept as a string constant so it ships inside the binary.
 *
 * The encoding is shaped by cost: every argument costs client CPU to send and server CPU
 * to parse, so the two bulk parts of a batch (one result marker per command, every event)
 * go in sections without op codes or key indexes, and an order hash sends only its values.
 */

/** The fields of an order hash, in the order the `O` op sends their values. */
export const orderHashFields = [
  "id",
  "userId",
  "pairId",
  "side",
  "price",
  "volume",
  "volumeTotal",
  "timestamp",
  "sequence",
  "priceDecimals",
  "amountDecimals",
  "quoteDecimals",
  "stp",
  // "1" or "0". Hashes written before post-only orders were kept have no such field: a load
  // reads its absence as "0" (decodeOrder).
  "postOnly",
  // Epoch milliseconds of a good-till-date order, "0" for others; absent in older hashes.
  "expireAt",
  // An iceberg's volume shown at a time and its hidden volume; "0" and "0" for others.
  "displayVolume",
  "hiddenVolume",
  // A one-cancels-other leg's list id and other leg's order id; "" for others.
  "listId",
  "linkedOrderId",
] as const;

/** The fields of a stop order's hash, in the order the `P` op sends their values. */
export const stopHashFields = [
  "id",
  "userId",
  "pairId",
  "side",
  "type",
  "price",
  "stopPrice",
  "volume",
  "volumeTotal",
  "quoteVolume",
  "timeInForce",
  "stp",
  "timestamp",
  "sequence",
  "priceDecimals",
  "amountDecimals",
  "quoteDecimals",
  // As in orderHashFields: "0" unless a good-till-date stop; absent in older hashes.
  "expireAt",
  "listId",
  "linkedOrderId",
] as const;

/** HSET's field/value arguments for an op whose values follow its key index. */
function hashArgs(fields: readonly string[]): string {
  return fields.map((field, j) => `'${field}', ARGV[i + ${j + 2}]`).join(", ");
}

/*
 * KEYS[1]        owner-epoch key of the partition
 * KEYS[2]        the events stream (any key when the batch has no events)
 * KEYS[3]        the stream's sequence counter: the last `seq` given to an event
 * KEYS[4]        the commit counter: how many batches the partition's history holds
 * KEYS[5..]      the keys ops reference by index, then the nm marker keys (the last nm KEYS)
 * ARGV[1]        the epoch this conductor owns
 * ARGV[2]        the TTL in seconds of every marker
 * ARGV[3]        nm, the number of markers: SET KEYS[#KEYS-nm+j] ARGV[6+j-1] EX ttl
 * ARGV[4]        ne, the number of events, which follow the marker values:
 *                XADD KEYS[2] * event json seq n, in order, n counting on from KEYS[3]
 * ARGV[5]        the commit count this batch builds on: the count after the conductor's
 *                last commit (or as it read it with the books)
 * ARGV[6+nm+ne..] ops, each an op code followed by its arguments (k: a KEYS index):
 *                S k ttl value        SET KEYS[k] value EX ttl
 *                O k v1 .. v19        HSET an order hash: every field of orderHashFields
 *                                     (an order hash always has the same fields, so no
 *                                     stale field survives)
 *                P k v1 .. v20        HSET a stop order's hash: every field of stopHashFields
 *                H k field value      HSET KEYS[k] field value
 *                F k field            HDEL KEYS[k] field
 *                Z k score member     ZADD KEYS[k] score member
 *                R k member           ZREM KEYS[k] member
 *                D k                  DEL KEYS[k]
 *                X k json             XADD KEYS[k] * event json
 *                A k member           SADD KEYS[k] member
 *                E k ttl              EXPIRE KEYS[k] ttl (a key that is gone stays gone)
 * writes         markers, then events in order, then ops in order
 * returns        the number of writes; 0 when the batch had already been applied (a
 *                resend after a lost reply: its first marker exists), writing nothing
 * errors         "FENCED <expected> <found>" when the epoch differs (nothing written);
 *                "BADOP ..." on a bad header, an unknown op code, a bad key index or bad
 *                arity (nothing written: checked first); "DIVERGED <expected> <found>" when
 *                the commit count is not ARGV[5]: this node's history is not the one the
 *                batch was matched on (nothing written); "OOM ..." at maxmemory, with only
 *                the E ops (renewals of redelivered commands' markers) applied
 */
export const commitScript = `
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
  return redis.error_reply('FENCED ' .. ARGV[1] .. ' ' .. tostring(current))
end
local n = #ARGV
local ttl = ARGV[2]
local nm = tonumber(ARGV[3])
local ne = tonumber(ARGV[4])
local builtOn = tonumber(ARGV[5])
if nm == nil or ne == nil or builtOn == nil or nm < 0 or ne < 0 or 5 + nm + ne > n
  or 4 + nm > #KEYS then
  return redis.error_reply('BADOP header')
end
local markerBase = #KEYS - nm
local width = {
  S = 4, Z = 4, R = 3, D = 2, X = 3, A = 3, E = 3, H = 4, F = 3,
  O = ${2 + orderHashFields.length}, P = ${2 + stopHashFields.length}
}
local first = 6 + nm + ne
-- Validate every op before the first write: a script error after a write would leave
-- the batch half applied, because scripts are atomic but not rolled back.
local i = first
while i <= n do
  local op = ARGV[i]
  local w = width[op]
  if w == nil then
    return redis.error_reply('BADOP ' .. tostring(op))
  end
  if i + w - 1 > n then
    return redis.error_reply('BADOP truncated')
  end
  local k = tonumber(ARGV[i + 1])
  if k == nil or k < 5 or k > markerBase then
    return redis.error_reply('BADOP key ' .. op .. ' ' .. tostring(ARGV[i + 1]))
  end
  i = i + w
end
-- A batch with events starts with the result marker of a command that had none when the
-- batch was looked up. If it exists now, this exact commit already ran: the client resent
-- it after a reconnect lost the first reply. Applying it again would duplicate events.
if ne > 0 and nm > 0 and redis.call('EXISTS', KEYS[markerBase + 1]) == 1 then
  return 0
end
-- After a failover the batch could reach a node that lacks the batch before it (it was
-- matched on top of that one): applied there, it would reuse its sequence numbers.
local count = tonumber(redis.call('GET', KEYS[4]) or '0')
if count ~= builtOn then
  return redis.error_reply('DIVERGED ' .. ARGV[5] .. ' ' .. count)
end
-- The first write: at maxmemory (noeviction) it is refused, nothing is written, and the batch
-- is retried until memory returns. Its redelivered commands' markers are renewed all the same
-- (EXPIRE grows nothing and is allowed then): held past their TTL, they would expire and the
-- command would run a second time once memory is back.
local counted = redis.pcall('SET', KEYS[4], count + 1)
if type(counted) == 'table' and counted.err then
  i = first
  while i <= n do
    if ARGV[i] == 'E' then
      redis.call('EXPIRE', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2])
    end
    i = i + width[ARGV[i]]
  end
  return redis.error_reply(counted.err)
end
for j = 1, nm do
  redis.call('SET', KEYS[markerBase + j], ARGV[5 + j], 'EX', ttl)
end
local events = KEYS[2]
if ne > 0 then
  -- A contiguous number per event, so that a consumer can tell a gap (an event the broker
  -- refused while a later one got through) from the end of the stream.
  local seq = redis.call('INCRBY', KEYS[3], ne) - ne
  for j = 6 + nm, 5 + nm + ne do
    seq = seq + 1
    redis.call('XADD', events, '*', 'event', ARGV[j], 'seq', seq)
  end
end
i = first
local ops = 0
while i <= n do
  local op = ARGV[i]
  local key = KEYS[tonumber(ARGV[i + 1])]
  if op == 'O' then
    redis.call('HSET', key, ${hashArgs(orderHashFields)})
    i = i + ${2 + orderHashFields.length}
  elseif op == 'P' then
    redis.call('HSET', key, ${hashArgs(stopHashFields)})
    i = i + ${2 + stopHashFields.length}
  elseif op == 'H' then
    redis.call('HSET', key, ARGV[i + 2], ARGV[i + 3])
    i = i + 4
  elseif op == 'F' then
    redis.call('HDEL', key, ARGV[i + 2])
    i = i + 3
  elseif op == 'Z' then
    redis.call('ZADD', key, ARGV[i + 2], ARGV[i + 3])
    i = i + 4
  elseif op == 'R' then
    redis.call('ZREM', key, ARGV[i + 2])
    i = i + 3
  elseif op == 'D' then
    redis.call('DEL', key)
    i = i + 2
  elseif op == 'S' then
    redis.call('SET', key, ARGV[i + 3], 'EX', ARGV[i + 2])
    i = i + 4
  elseif op == 'X' then
    redis.call('XADD', key, '*', 'event', ARGV[i + 2])
    i = i + 3
  elseif op == 'A' then
    redis.call('SADD', key, ARGV[i + 2])
    i = i + 3
  elseif op == 'E' then
    redis.call('EXPIRE', key, ARGV[i + 2])
    i = i + 3
  end
  ops = ops + 1
end
return nm + ne + ops
`;

/**
 * Accumulates a batch's keys and writes in the script's encoding. The first TTL given to
 * `setWithTtl` becomes the batch's marker TTL and the first key given to `xadd` its
 * events stream; other TTLs and streams fall back to general ops.
 */
export class CommitBuilder {
  private readonly opKeys: string[] = [];
  private readonly ops: string[] = [];
  private readonly keyIndex = new Map<string, string>();
  private readonly markerKeys: string[] = [];
  private readonly markerValues: string[] = [];
  private markerTtl: number | undefined;
  private readonly events: string[] = [];
  private eventsKey: string | undefined;

  constructor(
    private readonly epochKey: string,
    private readonly epoch: number,
    private readonly sequenceKey: string,
    /** The commit counter and the count this batch builds on (KEYS[4], ARGV[5]). */
    private readonly chain: { key: string; builtOn: number },
  ) {}

  private sealed: { keys: string[]; args: string[] } | undefined;

  /** The script's KEYS; reading KEYS or ARGV seals the batch. */
  get keys(): string[] {
    return this.seal().keys;
  }

  /** The script's ARGV; reading KEYS or ARGV seals the batch. */
  get args(): string[] {
    return this.seal().args;
  }

  private seal(): { keys: string[]; args: string[] } {
    this.sealed ??= {
      keys: [
        this.epochKey,
        this.eventsKey ?? this.epochKey,
        this.sequenceKey,
        this.chain.key,
        ...this.opKeys,
        ...this.markerKeys,
      ],
      args: [
        String(this.epoch),
        String(this.markerTtl ?? 1),
        String(this.markerKeys.length),
        String(this.events.length),
        String(this.chain.builtOn),
        ...this.markerValues,
        ...this.events,
        ...this.ops,
      ],
    };
    return this.sealed;
  }

  private key(name: string): string {
    if (this.sealed) throw new Error("commit batch already sealed");
    let index = this.keyIndex.get(name);
    if (index === undefined) {
      this.opKeys.push(name);
      index = String(this.opKeys.length + 4);
      this.keyIndex.set(name, index);
    }
    return index;
  }

  /** A key must be written once per batch through this (markers are written before ops). */
  setWithTtl(key: string, value: string, ttlSeconds: number): void {
    if (this.sealed) throw new Error("commit batch already sealed");
    this.markerTtl ??= ttlSeconds;
    if (ttlSeconds === this.markerTtl) {
      this.markerKeys.push(key);
      this.markerValues.push(value);
    } else {
      this.ops.push("S", this.key(key), String(ttlSeconds), value);
    }
  }
  /** Replaces an order hash; `values` follow `orderHashFields`. */
  replaceOrderHash(key: string, values: readonly string[]): void {
    if (values.length !== orderHashFields.length) {
      throw new Error(`an order hash has ${orderHashFields.length} values, got ${values.length}`);
    }
    this.ops.push("O", this.key(key), ...values);
  }
  /** Replaces a stop order's hash; `values` follow `stopHashFields`. */
  replaceStopHash(key: string, values: readonly string[]): void {
    if (values.length !== stopHashFields.length) {
      throw new Error(`a stop hash has ${stopHashFields.length} values, got ${values.length}`);
    }
    this.ops.push("P", this.key(key), ...values);
  }
  hset(key: string, field: string, value: string): void {
    this.ops.push("H", this.key(key), field, value);
  }
  hdel(key: string, field: string): void {
    this.ops.push("F", this.key(key), field);
  }
  zadd(key: string, score: string, member: string): void {
    this.ops.push("Z", this.key(key), score, member);
  }
  zrem(key: string, member: string): void {
    this.ops.push("R", this.key(key), member);
  }
  del(key: string): void {
    this.ops.push("D", this.key(key));
  }
  xadd(key: string, json: string): void {
    if (this.sealed) throw new Error("commit batch already sealed");
    this.eventsKey ??= key;
    if (key === this.eventsKey) this.events.push(json);
    else this.ops.push("X", this.key(key), json);
  }
  sadd(key: string, member: string): void {
    this.ops.push("A", this.key(key), member);
  }
  /** Sets a key's time to live, if the key still exists (then it is a write, else nothing). */
  expire(key: string, ttlSeconds: number): void {
    this.ops.push("E", this.key(key), String(ttlSeconds));
  }
  /**
   * No marker and no event: the batch may write nothing at all (its ops, if any, are
   * expirations of keys that may be gone).
   */
  get mayWriteNothing(): boolean {
    return this.markerKeys.length + this.events.length === 0;
  }
}
