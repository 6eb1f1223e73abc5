/**
 * The outbox's Lua scripts, kept as string constants so they travel inside the
 * compiled executable, and a helper that runs one by SHA with a fallback to EVAL
 * when the datastore has not seen it yet (after a restart or SCRIPT FLUSH).
 */
import { createHash } from "node:crypto";
import type { Valkey } from "../infra/valkey/client";

export interface LuaScript {
  name: string;
  source: string;
  sha: string;
}

function script(name: string, source: string): LuaScript {
  return { name, source, sha: createHash("sha1").update(source).digest("hex") };
}

/**
 * Extends the lease only while this process still owns it.
 * KEYS[1] = the partition's outbox-lease key
 * ARGV[1] = this process's owner id
 * ARGV[2] = lease TTL in milliseconds
 * Returns 1 when the lease was extended, 0 when someone else (or no one) holds it.
 * Emits nothing.
 */
export const renewLeaseScript = script(
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
export const releaseLeaseScript = script(
  "release-lease",
  `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
`,
);

/** Runs a script by SHA; on NOSCRIPT sends the source once (EVAL caches it). */
export async function runScript(
  valkey: Valkey,
  lua: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await valkey.evalsha(lua.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
      return valkey.eval(lua.source, keys.length, ...keys, ...args);
    }
    throw error;
  }
}
