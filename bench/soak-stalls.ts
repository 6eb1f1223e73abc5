/**
 * The soak's Valkey stalls, laid beside its AOF rewrites: per server and event how many
 * main-thread stalls the latency monitor recorded and the longest, counted apart around
 * rewrites (the same windows the durability wait is judged in) and away from them.
 */
import type { RewriteWindow } from "./soak-analysis";
import type { SoakSample } from "./soak-sampler";
import { type Stall, stallThresholdMs } from "./valkey-stalls";

export interface StallRow {
  server: string;
  event: string;
  aroundRewrites: { count: number; maxMs: number };
  awayFromRewrites: { count: number; maxMs: number };
}

export function allStalls(samples: readonly SoakSample[]): Stall[] {
  return samples.flatMap((s) => s.stalls ?? []);
}

/** The longest stall in [from, to] on any server, or undefined. */
export function worstStallBetween(
  stalls: readonly Stall[],
  from: number,
  to: number,
): Stall | undefined {
  let worst: Stall | undefined;
  for (const stall of stalls) {
    if (stall.t >= from && stall.t <= to && stall.ms > (worst?.ms ?? -1)) worst = stall;
  }
  return worst;
}

/** Each server and event's stalls, split by whether a rewrite's window holds them. */
export function stallTable(stalls: readonly Stall[], rewrites: readonly RewriteWindow[]) {
  const rows = new Map<string, StallRow>();
  for (const stall of stalls) {
    const key = `${stall.server}/${stall.event}`;
    let row = rows.get(key);
    if (row === undefined) {
      row = {
        server: stall.server,
        event: stall.event,
        aroundRewrites: { count: 0, maxMs: 0 },
        awayFromRewrites: { count: 0, maxMs: 0 },
      };
      rows.set(key, row);
    }
    const near = rewrites.some((r) => stall.t >= r.spanFromS && stall.t <= r.spanToS);
    const cell = near ? row.aroundRewrites : row.awayFromRewrites;
    cell.count++;
    cell.maxMs = Math.max(cell.maxMs, stall.ms);
  }
  return { thresholdMs: stallThresholdMs, rows: [...rows.values()] };
}
