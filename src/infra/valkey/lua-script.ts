/**
 * Lua scripts as string constants, so they travel inside the compiled executable, run by
 * SHA with a fallback to EVAL when the datastore has not seen them yet (after a restart or
 * SCRIPT FLUSH): EVAL both runs the script and caches it for the next EVALSHA.
 */
import { createHash } from "node:crypto";
import type { Valkey } from "./client";
import { EncodedCommand } from "./encoded-command";

export interface LuaScript {
  name: string;
  source: string;
  sha: string;
}

export function luaScript(name: string, source: string): LuaScript {
  return { name, source, sha: createHash("sha1").update(source).digest("hex") };
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/** Runs `lua` with ioredis's own argument encoding: for scripts with a few arguments. */
export async function runScript(
  valkey: Valkey,
  lua: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await valkey.evalsha(lua.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (isNoScript(error)) return valkey.eval(lua.source, keys.length, ...keys, ...args);
    throw error;
  }
}

/**
 * Runs `lua` with the command encoded once as one string (see EncodedCommand): for scripts
 * that take hundreds or thousands of arguments per call, such as a batch commit.
 */
export async function runEncodedScript(
  valkey: Valkey,
  lua: LuaScript,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  const words = [lua.sha, String(keys.length), ...keys, ...args];
  try {
    return await valkey.sendCommand(new EncodedCommand("evalsha", words));
  } catch (error) {
    if (!isNoScript(error)) throw error;
    words[0] = lua.source;
    return valkey.sendCommand(new EncodedCommand("eval", words));
  }
}
