/**
 * The outbox's Lua scripts: the lease's renew and release, the stream acknowledgement,
 * forgetting idle consumers, and the write a read's durability wait covers.
 * Run them with runScript / runEncodedScript from infra/valkey/lua-script.
 */
import { luaScript } from "../infra/valkey/lua-script";

/**
 * Extends the lease only while this process still owns it.
 * KEYS[1] = the partition's outbox-lease key
 * ARGV[1] = this process's owner id
 * ARGV[2] = lease TTL in milliseconds
 * Returns 1 when the lease was extended, 0 when someone else (or no one) holds it.
 * Emits nothing.
 */
export const renewLeaseScript = luaScript(
  "renew-lease",
  `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
`,
);

/**
 * Deletes the lease only while this process still owns it, so a late release never
 * removes a successor's lease.
 * KEYS[1] = the partition's outbox-lease key
 * ARGV[1] = this process's owner id
 * Returns 1 when the lease was deleted, 0 otherwise. Emits nothing.
 */
export const releaseLeaseScript = luaScript(
  "release-lease",
  `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
`,
);

/**
 * Advances the stream past delivered entries, atomically.
 * KEYS[1] = the events stream, KEYS[2] = the attempt counters hash
 * ARGV[1] = the group, ARGV[2] = n, ARGV[3..2+n] = entry ids, ARGV[3+n..] = event ids whose
 * attempt counters to clear (none when no counter can exist)
 * Returns the counters left in the hash after clearing, or -1 when none were cleared.
 * A script rather than MULTI: one command to encode and parse instead of five, and just as
 * atomic. Lua's unpack takes at most ~8,000 values, hence the outbox's ack batch bound.
 */
export const acknowledgeScript = luaScript(
  "acknowledge",
  `local n = tonumber(ARGV[2])
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 3, 2 + n))
redis.call('XDEL', KEYS[1], unpack(ARGV, 3, 2 + n))
if #ARGV > 2 + n then
  redis.call('HDEL', KEYS[2], unpack(ARGV, 3 + n, #ARGV))
  return redis.call('HLEN', KEYS[2])
end
return -1
`,
);

/**
 * Deletes the group's consumers other than this one that have nothing pending and have been
 * idle at least ARGV[3] ms (earlier incarnations of the outbox), so the consumer list does not
 * grow with every restart. One script: a consumer that reads between a separate check and
 * XGROUP DELCONSUMER would lose its fresh pending entries with it.
 * KEYS[1] = the events stream
 * ARGV[1] = the group, ARGV[2] = this consumer's name, ARGV[3] = minimum idle milliseconds
 * Returns the number of consumers deleted.
 */
export const forgetIdleConsumersScript = luaScript(
  "forget-idle-consumers",
  `local removed = 0
local minIdle = tonumber(ARGV[3])
for _, info in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local fields = {}
  for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
  if fields['name'] ~= ARGV[2] and tonumber(fields['pending']) == 0
      and tonumber(fields['idle']) >= minIdle then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], fields['name'])
    removed = removed + 1
  end
end
return removed
`,
);

/**
 * The write after a read that gives the read's durability wait something to cover (see
 * OutboxStream). It refreshes the barrier key's TTL, and creates the key only when it is
 * missing. Why not a plain SET: at maxmemory with noeviction the datastore refuses SET, so
 * the outbox, the one process that frees memory (by deleting delivered entries), would stop
 * too. PEXPIRE is never refused that way; and in a script without a shebang line (this one)
 * only the first write is checked against maxmemory, so the SET behind it runs as well.
 * KEYS[1] = the partition's outbox-read-barrier key
 * ARGV[1] = this consumer's name (kept as the value, for whoever inspects the key)
 * ARGV[2] = TTL in milliseconds
 * Returns 1. Always writes (a PEXPIREAT or a SET), so its offset is past the entries read.
 */
export const readBarrierScript = luaScript(
  "read-barrier",
  `if redis.call('PEXPIRE', KEYS[1], ARGV[2]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
`,
);
