/**
 * The Lua script that commits one batch atomically and fenced: it refuses to write
 * unless the partition's owner epoch is still the committing conductor's, then applies
 * the batch's writes in order. Kept as a string constant so it ships inside the binary.
 */

/*
 * KEYS[1]      owner-epoch key of the partition
 * KEYS[2..n]   every key the batch writes (referenced by index from ARGV)
 * ARGV[1]      the epoch this conductor owns
 * ARGV[2..]    ops, each an op code followed by its arguments:
 *                S k ttl value        SET KEYS[k] value EX ttl
 *                H k n f1 v1 .. fn vn HSET the n field/value pairs (an order hash always
 *                                     has the same fields, so no stale field survives)
 *                Z k score member     ZADD KEYS[k] score member
 *                R k member           ZREM KEYS[k] member
 *                D k                  DEL KEYS[k]
 *                X k json             XADD KEYS[k] * event json
 *                A k member           SADD KEYS[k] member
 * returns      the number of ops applied
 * errors       "FENCED <expected> <found>" when the epoch differs (nothing written);
 *              "BADOP ..." on an unknown op code or bad arity (nothing written: checked first)
 */
export const commitScript = `
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
  return redis.error_reply('FENCED ' .. ARGV[1] .. ' ' .. tostring(current))
end
local width = { S = 4, Z = 4, R = 3, D = 2, X = 3, A = 3 }
local n = #ARGV
-- Validate every op before the first write: a script error after a write would leave
-- the batch half applied, because scripts are atomic but not rolled back.
local i = 2
while i <= n do
  local op = ARGV[i]
  if op == 'H' then
    i = i + 3 + tonumber(ARGV[i + 2]) * 2
  elseif width[op] then
    i = i + width[op]
  else
    return redis.error_reply('BADOP ' .. tostring(op))
  end
end
if i ~= n + 1 then
  return redis.error_reply('BADOP truncated')
end
i = 2
local ops = 0
while i <= n do
  local op = ARGV[i]
  if op == 'S' then
    redis.call('SET', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 3], 'EX', ARGV[i + 2])
    i = i + 4
  elseif op == 'H' then
    local key = KEYS[tonumber(ARGV[i + 1])]
    local count = tonumber(ARGV[i + 2])
    redis.call('HSET', key, unpack(ARGV, i + 3, i + 2 + count * 2))
    i = i + 3 + count * 2
  elseif op == 'Z' then
    redis.call('ZADD', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2], ARGV[i + 3])
    i = i + 4
  elseif op == 'R' then
    redis.call('ZREM', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2])
    i = i + 3
  elseif op == 'D' then
    redis.call('DEL', KEYS[tonumber(ARGV[i + 1])])
    i = i + 2
  elseif op == 'X' then
    redis.call('XADD', KEYS[tonumber(ARGV[i + 1])], '*', 'event', ARGV[i + 2])
    i = i + 3
  elseif op == 'A' then
    redis.call('SADD', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2])
    i = i + 3
  end
  ops = ops + 1
end
return ops
`;

/** Accumulates a batch's keys and ops in the script's encoding. */
export class CommitBuilder {
  readonly keys: string[];
  readonly args: string[];
  private readonly keyIndex = new Map<string, number>();

  constructor(epochKey: string, epoch: number) {
    this.keys = [epochKey];
    this.args = [String(epoch)];
  }

  private key(name: string): string {
    let index = this.keyIndex.get(name);
    if (index === undefined) {
      this.keys.push(name);
      index = this.keys.length;
      this.keyIndex.set(name, index);
    }
    return String(index);
  }

  setWithTtl(key: string, value: string, ttlSeconds: number): void {
    this.args.push("S", this.key(key), String(ttlSeconds), value);
  }
  replaceHash(key: string, fields: readonly string[]): void {
    this.args.push("H", this.key(key), String(fields.length / 2), ...fields);
  }
  zadd(key: string, score: string, member: string): void {
    this.args.push("Z", this.key(key), score, member);
  }
  zrem(key: string, member: string): void {
    this.args.push("R", this.key(key), member);
  }
  del(key: string): void {
    this.args.push("D", this.key(key));
  }
  xadd(key: string, json: string): void {
    this.args.push("X", this.key(key), json);
  }
  sadd(key: string, member: string): void {
    this.args.push("A", this.key(key), member);
  }
  get empty(): boolean {
    return this.args.length === 1;
  }
}
