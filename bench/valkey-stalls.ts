/**
 * Valkey's own latency monitor during a soak: each server's main-thread stalls above a
 * threshold, by event (`fork`, `aof-fsync-always`, `aof-write-active-child`, `command`, ...).
 * Read from `LATENCY HISTORY` at every sample, since the server keeps only its last 160 spikes
 * an event, so that a durability wait's tail can be laid beside the stalls that could cause it.
 */
import type { Valkey } from "../src/infra/valkey/client";

/** Spikes at least this long are recorded by the servers (`latency-monitor-threshold`). */
export const stallThresholdMs = 5;

export interface Stall {
  server: string;
  /** Valkey's event name, as `LATENCY LATEST` lists it. */
  event: string;
  /** Seconds since the load began (the server records whole seconds). */
  t: number;
  ms: number;
}

export class StallWatch {
  /** server + event → the latest spike's unix second already read. */
  private readonly readUpTo = new Map<string, number>();

  constructor(private readonly servers: Record<string, Valkey>) {}

  /**
   * The spikes since the last call, timed as `t` (seconds since the load began, now). The
   * threshold is set again each time: a restarted server starts without it.
   */
  async read(t: number): Promise<Stall[]> {
    const stalls: Stall[] = [];
    const nowS = Date.now() / 1000;
    for (const [server, valkey] of Object.entries(this.servers)) {
      // A server down (a replica restarted on purpose) is read again at the next sample.
      await this.readServer(server, valkey, t, nowS, stalls).catch(() => undefined);
    }
    return stalls;
  }

  private async readServer(
    server: string,
    valkey: Valkey,
    t: number,
    nowS: number,
    into: Stall[],
  ): Promise<void> {
    await valkey.config("SET", "latency-monitor-threshold", String(stallThresholdMs));
    const latest = (await valkey.call("LATENCY", "LATEST")) as [string, ...unknown[]][];
    for (const [event] of latest) {
      const history = (await valkey.call("LATENCY", "HISTORY", event)) as [number, number][];
      const key = `${server}/${event}`;
      const after = this.readUpTo.get(key) ?? 0;
      for (const [unixS, ms] of history) {
        if (unixS > after) into.push({ server, event, t: t - (nowS - unixS), ms });
      }
      this.readUpTo.set(key, Math.max(after, ...history.map(([unixS]) => unixS)));
    }
  }
}

/** The longest stall by server and event among `stalls`, longest first. */
export function worstStalls(stalls: readonly Stall[]): Stall[] {
  const worst = new Map<string, Stall>();
  for (const stall of stalls) {
    const key = `${stall.server}/${stall.event}`;
    if ((worst.get(key)?.ms ?? -1) < stall.ms) worst.set(key, stall);
  }
  return [...worst.values()].sort((a, b) => b.ms - a.ms);
}
