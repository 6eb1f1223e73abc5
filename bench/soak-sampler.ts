/**
 * What a soak run samples every few seconds: each Valkey server's memory, keys, AOF and
 * rewrites, the event stream's length, the command queue's depth, every process's RSS, the
 * services' heaps and durability timeouts, and the conductor's cumulative durability-wait
 * histogram (so a window's percentiles can be cut out between two samples).
 */
import { readFileSync } from "node:fs";
import type { ChannelModel } from "amqplib";
import { parseInfo, type Valkey } from "../src/infra/valkey/client";
import type { Stall, StallWatch } from "./valkey-stalls";

export interface ServerSample {
  usedMemory: number;
  keys: number;
  expiringKeys: number;
  aofBytes: number;
  /** The AOF's size after its last rewrite (`aof_base_size`): flat when memory is. */
  aofBaseBytes: number;
  rewrites: number;
  /** How long the server's last fork (for a rewrite or a replica's sync) froze it, µs. */
  forkUsec: number;
}

export interface SoakSample {
  /** Seconds since the soak's load began. */
  t: number;
  servers: Record<string, ServerSample>;
  streamLength: number;
  queueDepth: number;
  rssBytes: Record<string, number>;
  heapBytes: Record<string, number>;
  durabilityTimeouts: number;
  /** Cumulative counts per upper bound (seconds) of the conductor's durability wait. */
  durabilityWait: [bound: number, count: number][];
  /** The servers' main-thread stalls since the sample before (Valkey's latency monitor). */
  stalls: Stall[];
  /**
   * The partition's resting orders (the conductor's gauge): the books are state, not
   * history, and a workload whose books keep filling grows Valkey's memory by them.
   */
  restingOrders: number;
}

export interface SoakTargets {
  servers: Record<string, Valkey>;
  valkey: Valkey;
  streamKey: string;
  broker: ChannelModel;
  commandQueue: string;
  /** Process name → pid, servers and matchd processes alike. */
  pids: () => Record<string, number>;
  conductorUrl: string;
  outboxUrl: string;
  stalls: StallWatch;
}

/** VmRSS of a live process, in bytes; 0 once it is gone. */
export function rssOf(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /^VmRSS:\s+(\d+) kB/m.exec(status);
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

async function serverSample(valkey: Valkey): Promise<ServerSample> {
  const memory = parseInfo(await valkey.info("memory"));
  const persistence = parseInfo(await valkey.info("persistence"));
  const stats = parseInfo(await valkey.info("stats"));
  const keyspace = parseInfo(await valkey.info("keyspace"));
  const db = /keys=(\d+),expires=(\d+)/.exec(keyspace.get(`db${valkey.options.db ?? 0}`) ?? "");
  return {
    usedMemory: Number(memory.get("used_memory") ?? 0),
    keys: Number(db?.[1] ?? 0),
    expiringKeys: Number(db?.[2] ?? 0),
    aofBytes: Number(persistence.get("aof_current_size") ?? 0),
    aofBaseBytes: Number(persistence.get("aof_base_size") ?? 0),
    rewrites: Number(persistence.get("aof_rewrites") ?? 0),
    forkUsec: Number(stats.get("latest_fork_usec") ?? 0),
  };
}

/** The `<name>_bucket{...le="X"} N` lines of a Prometheus text page. */
export function histogramBuckets(text: string, name: string): [number, number][] {
  const buckets: [number, number][] = [];
  const pattern = new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"[^}]*\\} (\\d+)`, "gm");
  for (const match of text.matchAll(pattern)) {
    buckets.push([
      match[1] === "+Inf" ? Number.POSITIVE_INFINITY : Number(match[1]),
      Number(match[2]),
    ]);
  }
  return buckets;
}

async function metricsOf(url: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(2000) });
  return (await response.json()) as Record<string, unknown>;
}

export async function takeSample(targets: SoakTargets, t: number): Promise<SoakSample> {
  const servers: Record<string, ServerSample> = {};
  for (const [name, valkey] of Object.entries(targets.servers))
    servers[name] = await serverSample(valkey);
  const channel = await targets.broker.createChannel();
  const queueDepth = (await channel.checkQueue(targets.commandQueue)).messageCount;
  await channel.close();
  const rssBytes: Record<string, number> = {};
  for (const [name, pid] of Object.entries(targets.pids())) rssBytes[name] = rssOf(pid);
  const [conductor, outbox, prometheus] = await Promise.all([
    metricsOf(targets.conductorUrl),
    metricsOf(targets.outboxUrl),
    fetch(`${targets.conductorUrl}/metrics`, {
      headers: { accept: "text/plain" },
      signal: AbortSignal.timeout(2000),
    }).then((r) => r.text()),
  ]);
  return {
    t,
    servers,
    streamLength: await targets.valkey.xlen(targets.streamKey),
    queueDepth,
    rssBytes,
    heapBytes: {
      conductor: Number(conductor.matching_process_heap_used_bytes ?? 0),
      outbox: Number(outbox.matching_process_heap_used_bytes ?? 0),
    },
    durabilityTimeouts:
      Number(conductor.matching_durability_timeouts_total ?? 0) +
      Number(outbox.matching_outbox_durability_timeouts_total ?? 0),
    durabilityWait: histogramBuckets(prometheus, "matching_stage_durability_wait_seconds"),
    stalls: await targets.stalls.read(t),
    restingOrders: Number(conductor.matching_resting_orders ?? 0),
  };
}
