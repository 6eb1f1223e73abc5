/**
 * The outbox's Lua scripts: the lease's take, renew and release, the group's creation, the
 * stream acknowledgement, the dead letter, attempt counters and forgetting idle consumers.
 * (The read barrier is infra/valkey/durability's markerWriteScript.)
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

// The scripts below start with `#!lua flags=allow-oom`: a datastore at maxmemory with
// noeviction (the policy that never drops data) refuses every write that may grow memory,
// and the outbox is the one process that frees memory there, by deleting delivered
// entries. These writes are small and bounded (a key, a group, a counter per event in
// flight, an entry moved to the dead letter), and without them the outbox could not drain.
// (Renewing and releasing the lease and acknowledging entries write nothing that the
// datastore refuses there.)

/**
 * Takes the lease when nobody holds it (SET NX PX).
 * KEYS[1] = the partition's outbox-lease key
 * ARGV[1] = this process's owner id, ARGV[2] = lease TTL in milliseconds
 * Returns 1 when taken, 0 when someone holds it.
 */
export const acquireLeaseScript = luaScript(
  "acquire-lease",
  `#!lua flags=allow-oom
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
`,
);

/**
 * Creates the consumer group at id 0, and the stream with it.
 * KEYS[1] = the events stream, ARGV[1] = the group
 * Returns 1 when created, 0 when the group exists already.
 */
export const createGroupScript = luaScript(
  "create-group",
  `#!lua flags=allow-oom
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(created) == 'table' and created.err then
  if string.sub(created.err, 1, 9) == 'BUSYGROUP' then return 0 end
  return created
end
return 1
`,
);

/** The most field and value strings a dead-letter entry carries: Lua's unpack takes ~8,000. */
export const DEAD_LETTER_MAX_VALUES = 4000;

/**
 * Moves an undecodable entry to the dead letter: adds it there, acknowledges and deletes it.
 * KEYS[1] = the events stream, KEYS[2] = the dead-letter stream
 * ARGV[1] = the group, ARGV[2] = the entry id, ARGV[3..] = the dead-letter entry's fields
 * (at most DEAD_LETTER_MAX_VALUES of them)
 * Returns the dead-letter entry's id, or false when the entry is gone already: ioredis resends
 * a command whose reply a dropped connection lost, and a second run must not copy the entry
 * to the dead letter twice. (It is looked up, not deleted first: an XADD that failed after
 * the XDEL would lose the entry, for a script's writes are not rolled back.)
 */
export const deadLetterScript = luaScript(
  "dead-letter",
  `#!lua flags=allow-oom
if #redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2]) == 0 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  return false
end
local id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3, #ARGV))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return id
`,
);

/**
 * Counts one more publish attempt for each event id.
 * KEYS[1] = the attempt counters hash, ARGV = event ids
 * Returns the number of ids counted.
 */
export const recordAttemptsScript = luaScript(
  "record-attempts",
  `#!lua flags=allow-oom
for i = 1, #ARGV do
  redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
end
return #ARGV
`,
);
