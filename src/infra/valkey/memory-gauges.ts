/**
 * The datastore's memory on the conductor's /metrics: used memory, maxmemory, and the keys
 * that carry a TTL (the dedup window's stored results and order markers, of every partition
 * on that database, plus a few lease keys). Read with INFO every few seconds, which costs the
 * server O(1), never by scanning keys.
 */
import type { MetricsRegistry } from "../metrics";
import { parseInfo, type Valkey } from "./client";

export const memorySampleIntervalMs = 5000;

/** `expires=` of `db<N>` in INFO keyspace; 0 when the database holds no key. */
export function expiringKeys(keyspace: Map<string, string>, db: number): number {
  const line = keyspace.get(`db${db}`);
  const match = line === undefined ? null : /(?:^|,)expires=(\d+)/.exec(line);
  return match === null ? 0 : Number(match[1]);
}

export function exposeDatastoreMemory(registry: MetricsRegistry, valkey: Valkey): { stop(): void } {
  const db = valkey.options.db ?? 0;
  const latest = { used: 0, max: 0, expiring: 0 };
  registry.gauge(
    "matching_datastore_used_memory_bytes",
    "The datastore's used_memory (INFO memory), sampled every 5 s",
    () => latest.used,
  );
  registry.gauge(
    "matching_datastore_maxmemory_bytes",
    "The datastore's maxmemory (0: no limit), sampled every 5 s",
    () => latest.max,
  );
  registry.gauge(
    "matching_dedup_window_keys",
    "Keys with a TTL in the datastore's database: stored results and accepted-order markers of every partition on it, and lease keys",
    () => latest.expiring,
  );
  const sample = async () => {
    try {
      const memory = parseInfo(await valkey.info("memory"));
      const keyspace = parseInfo(await valkey.info("keyspace"));
      latest.used = Number(memory.get("used_memory") ?? 0);
      latest.max = Number(memory.get("maxmemory") ?? 0);
      latest.expiring = expiringKeys(keyspace, db);
    } catch {
      // A datastore that is down keeps the last figures; readiness says it is down.
    }
  };
  void sample();
  const timer = setInterval(() => void sample(), memorySampleIntervalMs);
  return { stop: () => clearInterval(timer) };
}
