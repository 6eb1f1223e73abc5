/**
 * The datastore boundary's report: the commit's shape alone against Valkey, memory and
 * aof-replicated rows side by side (datastore-bench.ts), with the durability wait alone.
 */
import { runDatastoreBench } from "./datastore-bench";
import type { BenchReport } from "./report";
import { intFlag, round, type StackContext, type StackReport } from "./stack-boundary";

export async function datastoreReport(context: StackContext): Promise<StackReport> {
  const { config, flags, progress } = context;
  const environment = context.envFacts;
  const transactions = intFlag(flags, "--commands", 5000);
  const connectionsFlag = flags.get("--connections");
  const connections = connectionsFlag === undefined ? [1, 8] : [intFlag(flags, "--connections", 1)];
  const result = await runDatastoreBench({
    datastoreUrl: config.datastoreUrl,
    transactions,
    connections,
    durabilityTimeoutMs: config.durabilityTimeoutMs,
    log: progress,
  });
  const durable = result.rows.find(
    (r) => r.policy === "aof-replicated" && r.connections === connections[0],
  )!;
  const extra: BenchReport["extra"] = {};
  for (const row of result.rows) {
    extra[`${row.policy} x${row.connections} tx/s`] = Math.round(row.txPerSecond);
    extra[`${row.policy} x${row.connections} latency ms`] = JSON.stringify(row.latencyMs);
  }
  extra["durability wait alone ms"] = JSON.stringify(result.waitDurableMs);
  const committedAsMade = result.rows.every((row) => row.committed === row.commitsMade);
  extra["server appendfsync"] = String(result.server.appendfsync);
  const report: BenchReport = {
    boundary: "datastore",
    boundaryStatement:
      "MULTI; HSET order; ZADD book; XADD event; SET processed-command EX; EXEC, sequential per connection, one partition key space per connection; under aof-replicated each EXEC is followed by the durability wait (WAITAOF 1 1 in short slices); the memory rows skip that wait but the server still runs its own appendfsync (shown below)",
    durability: "both: memory and aof-replicated rows below",
    workload: "synthetic commit shape of one command",
    unit: "transactions",
    commands: durable.transactions,
    warmup: 0,
    seconds: round(durable.seconds, 3),
    commandsPerSecond: Math.round(durable.txPerSecond),
    latencyMs: durable.latencyMs,
    invariants: {
      ok:
        result.durabilityTimeouts === 0 &&
        committedAsMade &&
        result.server.replicasBefore >= 1 &&
        result.server.replicasAfter >= 1 &&
        result.keysLeft === 0,
      durabilityTimeouts: result.durabilityTimeouts,
      everyCommitWritten: committedAsMade,
      commitsWritten: result.rows.reduce((sum, row) => sum + row.committed, 0),
      replicasBefore: result.server.replicasBefore,
      replicasAfter: result.server.replicasAfter,
      keysLeftBehind: result.keysLeft,
    },
    environment,
    extra,
  };
  return { report, series: durable.series };
}
