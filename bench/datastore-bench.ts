// The "datastore" boundary: the conductor's commit shape (MULTI; HSET; ZADD; XADD; SET EX;
// EXEC) in isolation, sequential per connection, timed with and without the durability wait,
// plus the durability wait timed on its own.

import { connectedReplicas, createValkey, type Valkey } from "../src/infra/valkey/client";
import {
  checkDatastore,
  DurabilityTimeoutError,
  waitDurable,
} from "../src/infra/valkey/durability";
import { type PartitionKeys, partitionKeys } from "../src/infra/valkey/keys";
import { LatencyHistogram, type Percentiles } from "./histogram";
import { type ReportSeries, SeriesRecorder } from "./series-recorder";

export type DatastorePolicy = "memory" | "aof-replicated";

export interface DatastoreBenchRow {
  policy: DatastorePolicy;
  connections: number;
  transactions: number;
  seconds: number;
  txPerSecond: number;
  /** One transaction: EXEC round trip, plus the durability wait under aof-replicated. */
  latencyMs: Percentiles;
  durabilityTimeouts: number;
  /** Stream entries the row's commits left in its key spaces (each commit appends one). */
  committed: number;
  /** Commits the row made: warm-up plus timed. */
  commitsMade: number;
  /** Per-second throughput and latency plus the latency histogram, for the HTML report. */
  series: ReportSeries;
}

export interface DatastoreBenchResult {
  rows: DatastoreBenchRow[];
  /** The durability wait alone: a SET, then waitDurable timed by itself. */
  waitDurableMs: Percentiles;
  waitDurableSamples: number;
  /** Timeouts across every aof-replicated row and the wait-alone run. */
  durabilityTimeouts: number;
  /**
   * What the server did during the run. appendfsync applies to the memory rows too: with
   * `always` the primary fsyncs before it replies, so "memory" means "no client-side wait",
   * not "no disk".
   */
  server: {
    appendonly: string;
    appendfsync: string;
    replicasBefore: number;
    replicasAfter: number;
  };
  /** Keys left in the bench's key spaces after cleanup; anything but 0 is a bug. */
  keysLeft: number;
}

export interface DatastoreBenchOptions {
  datastoreUrl: string;
  /** Transactions per row, split evenly across that row's connections. */
  transactions: number;
  connections: number[];
  durabilityTimeoutMs: number;
  /** First partition number of the bench's key spaces; connection i uses partitionBase + i. */
  partitionBase?: number;
  /** Samples for the wait-alone measurement; default min(transactions, 2000). */
  waitSamples?: number;
  /** Untimed transactions per connection before each row (connection and server warm-up). */
  warmupPerConnection?: number;
  log?: (line: string) => void;
}

/** Pads the event so its JSON is about the size the conductor writes (~450 bytes). */
const eventTargetBytes = 450;
/** How long processed-command markers live; matches the conductor's dedup retention scale. */
const processedTtlSeconds = 3600;

export async function runDatastoreBench(
  options: DatastoreBenchOptions,
): Promise<DatastoreBenchResult> {
  const {
    datastoreUrl,
    transactions,
    connections,
    durabilityTimeoutMs,
    partitionBase = 900,
    waitSamples = Math.min(transactions, 2000),
    warmupPerConnection = 20,
    log = () => {},
  } = options;
  if (!(transactions >= 1) || connections.length === 0 || connections.some((c) => !(c >= 1))) {
    throw new Error("runDatastoreBench needs transactions >= 1 and connection counts >= 1");
  }
  const maxConnections = Math.max(...connections);
  const keySpaces = Array.from({ length: maxConnections }, (_, i) =>
    partitionKeys(partitionBase + i),
  );
  const admin = createValkey(datastoreUrl, { name: "matchd-bench-datastore-admin" });
  try {
    // Refuse to label a run aof-replicated when the datastore cannot honour it: a fast run
    // with an absent replica would be memory mode under the wrong name.
    const checks = await checkDatastore(
      admin,
      "aof-replicated",
      durabilityTimeoutMs,
      `${keySpaces[0]!.prefix}bench-probe`,
    );
    const failed = checks.filter((c) => !c.ok);
    if (failed.length > 0) {
      throw new Error(
        `the datastore cannot honour aof-replicated: ${failed.map((c) => `${c.name}: ${c.detail}`).join("; ")}`,
      );
    }
    const appendonly = ((await admin.config("GET", "appendonly")) as string[])[1] ?? "unknown";
    const appendfsync = ((await admin.config("GET", "appendfsync")) as string[])[1] ?? "unknown";
    const replicasBefore = await connectedReplicas(admin);
    await deleteKeySpaces(admin, keySpaces);

    const rows: DatastoreBenchRow[] = [];
    for (const policy of ["memory", "aof-replicated"] as const) {
      for (const count of connections) {
        const row = await runRow({
          datastoreUrl,
          policy,
          keySpaces: keySpaces.slice(0, count),
          transactions,
          durabilityTimeoutMs,
          warmupPerConnection,
        });
        rows.push(row);
        log(
          `datastore ${policy} x${count}: ${Math.round(row.txPerSecond)} tx/s, p50 ${row.latencyMs.p50} ms, p99 ${row.latencyMs.p99} ms, max ${row.latencyMs.max} ms` +
            (row.durabilityTimeouts > 0 ? `, ${row.durabilityTimeouts} durability timeouts` : ""),
        );
        // Each row starts from empty key spaces so a growing book or stream does not favour the first.
        await deleteKeySpaces(admin, keySpaces);
      }
    }

    const wait = await measureWaitAlone(
      datastoreUrl,
      keySpaces[0]!,
      waitSamples,
      durabilityTimeoutMs,
    );
    log(
      `durability wait alone (${waitSamples} samples): p50 ${wait.latencyMs.p50} ms, p99 ${wait.latencyMs.p99} ms, max ${wait.latencyMs.max} ms`,
    );
    const replicasAfter = await connectedReplicas(admin);
    await deleteKeySpaces(admin, keySpaces);
    const keysLeft = await countKeys(admin, keySpaces);
    return {
      rows,
      waitDurableMs: wait.latencyMs,
      waitDurableSamples: waitSamples,
      durabilityTimeouts: rows.reduce((sum, r) => sum + r.durabilityTimeouts, 0) + wait.timeouts,
      server: { appendonly, appendfsync, replicasBefore, replicasAfter },
      keysLeft,
    };
  } finally {
    // A failed run must not leave its keys behind either; errors here would hide the cause.
    await deleteKeySpaces(admin, keySpaces).catch(() => {});
    admin.disconnect();
  }
}

async function runRow(spec: {
  datastoreUrl: string;
  policy: DatastorePolicy;
  keySpaces: PartitionKeys[];
  transactions: number;
  durabilityTimeoutMs: number;
  warmupPerConnection: number;
}): Promise<DatastoreBenchRow> {
  const { policy, keySpaces, transactions, durabilityTimeoutMs } = spec;
  const count = keySpaces.length;
  const conns = keySpaces.map((_, i) =>
    createValkey(spec.datastoreUrl, { name: `matchd-bench-datastore-${policy}-${i}` }),
  );
  try {
    await Promise.all(conns.map((c) => c.ping()));
    const durable = policy === "aof-replicated";
    const histograms = conns.map(() => new LatencyHistogram());
    // Quarter-second points: a row lasts only a few seconds, and a one-second grid would hide stalls.
    const recorder = new SeriesRecorder({ intervalMs: 250 });
    let timeouts = 0;
    const commit = async (
      conn: Valkey,
      keys: PartitionKeys,
      worker: number,
      seq: number,
      timed: LatencyHistogram | undefined,
    ) => {
      const tx = buildTransaction(worker, seq);
      const started = Bun.nanoseconds();
      await execCommit(conn, keys, tx);
      if (durable) {
        try {
          await waitDurable(conn, durabilityTimeoutMs);
        } catch (error) {
          // A timeout is recorded, not hidden: its latency counts, the run goes on, and it
          // fails the row's invariant, in the warm-up as well.
          if (!(error instanceof DurabilityTimeoutError)) throw error;
          timeouts++;
        }
      }
      if (timed !== undefined) {
        const finished = Bun.nanoseconds();
        timed.record(finished - started);
        recorder.record(finished - started, finished);
      }
    };

    await Promise.all(
      conns.map(async (conn, i) => {
        for (let s = 0; s < spec.warmupPerConnection; s++)
          await commit(conn, keySpaces[i]!, i, -1 - s, undefined);
      }),
    );
    const startedNs = Bun.nanoseconds();
    recorder.start(startedNs);
    await Promise.all(
      conns.map(async (conn, i) => {
        // Sequential per connection on purpose: one ordered partition commits one at a time.
        const share = Math.floor(transactions / count) + (i < transactions % count ? 1 : 0);
        for (let s = 0; s < share; s++) await commit(conn, keySpaces[i]!, i, s, histograms[i]);
      }),
    );
    const seconds = (Bun.nanoseconds() - startedNs) / 1e9;
    const all = new LatencyHistogram();
    for (const h of histograms) all.merge(h);
    // What the commits really wrote: one stream entry each, counted before the cleanup.
    let committed = 0;
    for (const keys of keySpaces) committed += await conns[0]!.xlen(keys.events);
    return {
      committed,
      commitsMade: all.count + spec.warmupPerConnection * count,
      policy,
      connections: count,
      transactions: all.count,
      seconds,
      txPerSecond: all.count / seconds,
      latencyMs: all.percentilesMs(),
      durabilityTimeouts: timeouts,
      series: recorder.series(),
    };
  } finally {
    for (const c of conns) c.disconnect();
  }
}

export interface Transaction {
  commandId: string;
  orderId: string;
  price: number;
  order: Record<string, string>;
  event: string;
}

/** Built before the timer starts, so JSON encoding is not counted as datastore time. */
export function buildTransaction(worker: number, seq: number): Transaction {
  const commandId = `bench-cmd-${worker}-${seq}`;
  const orderId = `bench-order-${worker}-${seq}`;
  const price = 100 + (seq % 50);
  const order = {
    id: orderId,
    userId: "bench-user",
    side: "bid",
    type: "limit",
    pairId: "1",
    price: String(price),
    volume: "1",
    volumeTotal: "1",
    sequence: String(seq),
  };
  const envelope = {
    schemaVersion: 1,
    eventId: `${commandId}:0:order.rested.v1`,
    type: "order.rested.v1",
    partition: 0,
    pairId: 1,
    commandId,
    correlationId: commandId,
    ordinal: 0,
    occurredAt: "2024-01-01T00:00:00.000Z",
    payload: { ...order, pad: "" },
  };
  const base = JSON.stringify(envelope).length;
  envelope.payload.pad = "x".repeat(Math.max(0, eventTargetBytes - base));
  return { commandId, orderId, price, order, event: JSON.stringify(envelope) };
}

export function execCommit(conn: Valkey, keys: PartitionKeys, tx: Transaction): Promise<void> {
  return execCommits(conn, keys, [tx]);
}

/** Several commands' writes in one transaction, as a group commit makes them. */
export async function execCommits(
  conn: Valkey,
  keys: PartitionKeys,
  txs: readonly Transaction[],
): Promise<void> {
  const multi = conn.multi();
  for (const tx of txs) {
    multi
      .hset(keys.order(tx.orderId), tx.order)
      .zadd(keys.bookRates(1, "bid"), tx.price, tx.orderId)
      .xadd(keys.events, "*", "event", tx.event)
      .set(keys.processedCommand(tx.commandId), '{"status":"accepted"}', "EX", processedTtlSeconds);
  }
  const replies = await multi.exec();
  // As in the conductor, an error inside EXEC is a failed commit, never a success.
  if (replies === null) throw new Error("EXEC was aborted");
  for (const [error] of replies) if (error) throw error;
}

async function measureWaitAlone(
  datastoreUrl: string,
  keys: PartitionKeys,
  samples: number,
  timeoutMs: number,
): Promise<{ latencyMs: Percentiles; timeouts: number }> {
  const conn = createValkey(datastoreUrl, { name: "matchd-bench-datastore-wait" });
  const histogram = new LatencyHistogram();
  let timeouts = 0;
  try {
    const key = `${keys.prefix}bench-wait-probe`;
    for (let i = 0; i < samples; i++) {
      // The SET gives WAITAOF something new to confirm; only the wait itself is timed.
      await conn.set(key, String(i));
      const started = Bun.nanoseconds();
      try {
        await waitDurable(conn, timeoutMs);
      } catch (error) {
        if (!(error instanceof DurabilityTimeoutError)) throw error;
        timeouts++;
      }
      histogram.record(Bun.nanoseconds() - started);
    }
  } finally {
    conn.disconnect();
  }
  return { latencyMs: histogram.percentilesMs(), timeouts };
}

/** Every key of one partition, found with SCAN (never KEYS, which blocks the server). */
async function keysOf(valkey: Valkey, { prefix }: PartitionKeys): Promise<string[]> {
  const found: string[] = [];
  // The prefix's braces are literal in a SCAN glob; it holds no * ? [ or backslash.
  let cursor = "0";
  do {
    const [next, batch] = await valkey.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    found.push(...batch);
    cursor = next;
  } while (cursor !== "0");
  return found;
}

export async function deleteKeySpaces(valkey: Valkey, keySpaces: PartitionKeys[]): Promise<void> {
  // One partition at a time, so every UNLINK stays within one hash slot (a cluster needs that),
  // in bounded batches that keep each call short.
  for (const keys of keySpaces) {
    const found = await keysOf(valkey, keys);
    for (let i = 0; i < found.length; i += 500) await valkey.unlink(...found.slice(i, i + 500));
  }
}

async function countKeys(valkey: Valkey, keySpaces: PartitionKeys[]): Promise<number> {
  let total = 0;
  for (const keys of keySpaces) total += (await keysOf(valkey, keys)).length;
  return total;
}
