/**
 * A pipeline run must cross what a long-running deployment crosses: an AOF rewrite on the
 * primary and on every replica. This reads each server's `aof_rewrites` when the timed window
 * opens and when it closes, and, halfway through, forces `BGREWRITEAOF` on every server that
 * has not rewritten yet (a run too short to reach an automatic one), noting when.
 */

import { parseInfo, type Valkey } from "../src/infra/valkey/client";
import { listedReplicas } from "../src/infra/valkey/fsync-policy";
import type { Span } from "./series-recorder";

interface Server {
  name: string;
  valkey: Valkey;
  before: number;
  forcedAtSeconds?: number;
  /** When the rewrite in flight was first seen, in the run's seconds. */
  rewritingSince?: number;
  /** `aof_rewrites` at the last sample. */
  countSeen?: number;
}

export interface AofRewriteCount {
  server: string;
  rewrites: number;
  forcedAtSeconds?: number;
}

/** One `INFO persistence`: the server's rewrite count, and whether one runs or is scheduled. */
async function rewriteState(valkey: Valkey): Promise<{ count: number; rewriting: boolean }> {
  const persistence = parseInfo(await valkey.info("persistence"));
  return {
    count: Number(persistence.get("aof_rewrites") ?? Number.NaN),
    rewriting:
      persistence.get("aof_rewrite_in_progress") === "1" ||
      persistence.get("aof_rewrite_scheduled") === "1",
  };
}

const rewritesOf = async (valkey: Valkey) => (await rewriteState(valkey)).count;
const rewriting = async (valkey: Valkey) => (await rewriteState(valkey)).rewriting;

export class AofRewriteWatch {
  private readonly seen: Span[] = [];
  private lastSampleAt = 0;
  private origin: number | undefined;
  private closed = false;

  private constructor(
    private readonly servers: Server[],
    private readonly opened: number,
  ) {}

  /** The primary and every replica it lists, with their rewrite counts now. */
  static async open(primary: Valkey): Promise<AofRewriteWatch> {
    const listed = listedReplicas(parseInfo(await primary.info("replication")));
    const servers: Server[] = [{ name: "primary", valkey: primary, before: 0 }];
    for (const { ip, port } of listed) {
      const replica = primary.duplicate({
        host: ip,
        port,
        connectionName: "matchd-bench-replica",
        commandTimeout: 5000,
        maxRetriesPerRequest: 1,
      });
      replica.on("error", () => undefined);
      servers.push({ name: `replica ${ip}:${port}`, valkey: replica, before: 0 });
    }
    for (const server of servers) server.before = await rewritesOf(server.valkey);
    return new AofRewriteWatch(servers, performance.now());
  }

  /**
   * Notes which servers are rewriting now (in the run's seconds): polled through the run, it
   * gives each rewrite's span to within a poll interval, for the report's time charts.
   */
  async sample(): Promise<void> {
    // The replicas' connections go at close; the run's sampler may still be polling.
    if (this.closed) return;
    const t = this.seconds();
    const previous = this.lastSampleAt;
    this.lastSampleAt = t;
    for (const server of this.servers) {
      const { count, rewriting: now } = await rewriteState(server.valkey);
      // Counted from the window's opening: a rewrite before the first sample counts too.
      const done = count - (server.countSeen ?? server.before);
      server.countSeen = count;
      if (now && server.rewritingSince === undefined) server.rewritingSince = t;
      else if (!now && server.rewritingSince !== undefined) this.endSpan(server, t);
      // One that began and ended between two samples: its span is the interval between them.
      else if (!now && done > 0) this.seen.push(this.spanOf(server, previous, t));
    }
  }

  /** The rewrites seen so far, a rewrite still in flight ending at the last sample. */
  spans(): Span[] {
    for (const server of this.servers) {
      if (server.rewritingSince !== undefined) this.endSpan(server, this.lastSampleAt);
    }
    return [...this.seen];
  }

  /** The spans' time zero (performance.now()): the timed run's start; the opening until set. */
  startsAt(originMs: number): void {
    this.origin = originMs;
  }

  /** Seconds since the time zero: the clock of the spans and of forcedAtSeconds. */
  private seconds(): number {
    return (performance.now() - (this.origin ?? this.opened)) / 1000;
  }

  private endSpan(server: Server, t: number): void {
    this.seen.push(this.spanOf(server, server.rewritingSince ?? t, t));
    server.rewritingSince = undefined;
  }

  private spanOf(server: Server, from: number, to: number): Span {
    const detail = server.name === "primary" ? "primary" : "replica";
    return { label: "AOF rewrite", detail, fromSeconds: from, toSeconds: to };
  }

  /** Forces a rewrite on every server that has not rewritten since the window opened. */
  async forceWhereNone(): Promise<void> {
    for (const server of this.servers) {
      if (server.forcedAtSeconds !== undefined) continue;
      if ((await rewritesOf(server.valkey)) > server.before) continue;
      await server.valkey.call("BGREWRITEAOF");
      // Its span starts now, whether or not a sample sees it running.
      server.rewritingSince ??= this.seconds();
      server.forcedAtSeconds = Math.round(this.seconds() * 10) / 10;
    }
  }

  /** Each server's rewrites in the window, once those under way finished (10 s at most). */
  async close(): Promise<AofRewriteCount[]> {
    const deadline = performance.now() + 10_000;
    const counts: AofRewriteCount[] = [];
    this.closed = true;
    for (const server of this.servers) {
      while ((await rewriting(server.valkey)) && performance.now() < deadline) await Bun.sleep(50);
      // Finished (or still running at the deadline) now, in the run's seconds; one that ran
      // wholly since the last sample spans from it.
      const now = this.seconds();
      const count = await rewritesOf(server.valkey);
      if (server.rewritingSince !== undefined) this.endSpan(server, now);
      else if (count > (server.countSeen ?? server.before))
        this.seen.push(this.spanOf(server, this.lastSampleAt, now));
      counts.push({
        server: server.name,
        rewrites: count - server.before,
        ...(server.forcedAtSeconds === undefined
          ? {}
          : { forcedAtSeconds: server.forcedAtSeconds }),
      });
      if (server.name !== "primary") server.valkey.disconnect();
    }
    return counts;
  }
}

/** One line for the report: each server's rewrites and whether the bench forced them. */
export function describeRewrites(counts: readonly AofRewriteCount[]): string {
  return counts
    .map(
      (c) =>
        `${c.server} ${c.rewrites}${c.forcedAtSeconds === undefined ? "" : ` (forced with BGREWRITEAOF at ${c.forcedAtSeconds} s: the run would not reach an automatic one)`}`,
    )
    .join(", ");
}
