/**
 * A pipeline run must cross what a long-running deployment crosses: an AOF rewrite on the
 * primary and on every replica. This reads each server's `aof_rewrites` when the timed window
 * opens and when it closes, and, halfway through, forces `BGREWRITEAOF` on every server that
 * has not rewritten yet (a run too short to reach an automatic one), noting when.
 */

import { parseInfo, type Valkey } from "../infra/valkey/client";
import { listedReplicas } from "../infra/valkey/fsync-policy";

interface Server {
  name: string;
  valkey: Valkey;
  before: number;
  forcedAtSeconds?: number;
}

export interface AofRewriteCount {
  server: string;
  rewrites: number;
  forcedAtSeconds?: number;
}

async function rewritesOf(valkey: Valkey): Promise<number> {
  return Number(parseInfo(await valkey.info("persistence")).get("aof_rewrites") ?? Number.NaN);
}

async function rewriting(valkey: Valkey): Promise<boolean> {
  const persistence = parseInfo(await valkey.info("persistence"));
  return (
    persistence.get("aof_rewrite_in_progress") === "1" ||
    persistence.get("aof_rewrite_scheduled") === "1"
  );
}

export class AofRewriteWatch {
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

  /** Forces a rewrite on every server that has not rewritten since the window opened. */
  async forceWhereNone(): Promise<void> {
    for (const server of this.servers) {
      if (server.forcedAtSeconds !== undefined) continue;
      if ((await rewritesOf(server.valkey)) > server.before) continue;
      await server.valkey.call("BGREWRITEAOF");
      server.forcedAtSeconds = Math.round((performance.now() - this.opened) / 100) / 10;
    }
  }

  /** Each server's rewrites in the window, once those under way finished (10 s at most). */
  async close(): Promise<AofRewriteCount[]> {
    const deadline = performance.now() + 10_000;
    const counts: AofRewriteCount[] = [];
    for (const server of this.servers) {
      while ((await rewriting(server.valkey)) && performance.now() < deadline) await Bun.sleep(50);
      counts.push({
        server: server.name,
        rewrites: (await rewritesOf(server.valkey)) - server.before,
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
