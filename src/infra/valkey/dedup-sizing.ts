/**
 * What the dedup window costs the datastore. Every command leaves its stored result, and each
 * accepted order a marker, until the window expires them, so at a steady rate the window holds
 * rate × window × the bytes of one command. Stated at the conductor's boot and by `matchd
 * check`, with a warning when maxmemory cannot hold it or the window is under an hour.
 */

import { parseInfo, type Valkey } from "./client";
import type { CheckOutcome } from "./durability";

/**
 * Valkey memory one command holds while its window lasts, as `bench soak` measured it at
 * 1,000 commands/s of the exchange mix with a 120 s window (runs-2026-12-04.md), results
 * stored compact: used_memory grew 312 B a command while the window filled, and held 303 B a
 * command of the window once it was crossed. Each result's stored form averages 49 bytes; a
 * result stored as a JSON object took 384 B a key (MEMORY USAGE) and the window 491 B a
 * command at 2,000/s.
 */
export const dedupBytesPerCommand = 320;

/** A window shorter than this is allowed (a soak crosses it) but warned about. */
export const safeDedupWindowS = 3600;

export function dedupWindowBytes(ratePerSecond: number, windowSeconds: number): number {
  return ratePerSecond * windowSeconds * dedupBytesPerCommand;
}

const gb = (bytes: number) => `${(bytes / 1e9).toFixed(2)} GB`;

export async function checkDedupSizing(
  valkey: Valkey,
  windowSeconds: number,
  expectedRate: number,
): Promise<CheckOutcome> {
  const name = "dedup window fits in memory";
  const needed = dedupWindowBytes(expectedRate, windowSeconds);
  const holds = `the ${windowSeconds} s dedup window at ${expectedRate} commands/s (MATCHING_EXPECTED_RATE) holds about ${gb(needed)} (${dedupBytesPerCommand} B a command), beside the books`;
  const problems: string[] = [];
  let limit = "";
  try {
    const memory = parseInfo(await valkey.info("memory"));
    const maxmemory = Number(memory.get("maxmemory") ?? 0);
    if (maxmemory > 0) {
      const rateItHolds = Math.floor(maxmemory / (windowSeconds * dedupBytesPerCommand));
      limit = `; maxmemory ${gb(maxmemory)} holds the window up to ${rateItHolds} commands/s`;
      if (needed > maxmemory)
        problems.push(
          `maxmemory ${gb(maxmemory)} cannot hold it: at maxmemory every commit is refused; raise maxmemory or shorten MATCHING_DEDUP_RETENTION_S`,
        );
    } else limit = "; no maxmemory is set: the machine's memory must hold it";
  } catch (error) {
    limit = `; maxmemory could not be read (${(error as Error).message})`;
  }
  if (windowSeconds < safeDedupWindowS)
    problems.push(
      `the window is under an hour: a producer's retry, or a redelivery after every conductor of the partition was down, that comes later than ${windowSeconds} s executes its command again`,
    );
  return problems.length === 0
    ? { name, ok: true, detail: holds + limit }
    : { name, ok: true, warning: true, detail: `${holds}${limit}; ${problems.join("; ")}` };
}
