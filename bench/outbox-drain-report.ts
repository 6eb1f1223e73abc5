/**
 * The outbox-drain boundary's report: a backlog of events drained from the stream to the
 * sinks by an outbox the bench starts (outbox-drain.ts), with every count checked.
 */
import type { Config } from "../src/config/schema";
import { runOutboxDrainBench, type SinkMode } from "./outbox-drain";
import type { BenchReport } from "./report";
import { startService } from "./services";
import { intFlag, type StackContext, type StackReport, sinkQueueStatement } from "./stack-boundary";

export async function outboxDrainReport(context: StackContext): Promise<StackReport> {
  const { config, flags, progress, outboxFlags } = context;
  const services = context.run;
  const events = intFlag(flags, "--events", intFlag(flags, "--commands", 100_000));
  // flag-check refused anything else.
  const sink: SinkMode = flags.get("--sink") === "queued" ? "queued" : "live";
  const result = await runOutboxDrainBench({
    config,
    events,
    sink,
    window: config.outboxWindow,
    log: progress,
    startOutbox: async (extraArgs) => {
      const extra: Record<string, string> = {};
      for (let i = 0; i + 1 < extraArgs.length; i += 2) extra[extraArgs[i]!] = extraArgs[i + 1]!;
      const service = await startService(
        "outbox",
        { ...outboxFlags, ...extra },
        progress,
        services.register,
      );
      return {
        metricsUrl: `${service.url}/metrics`,
        stop: async () => {
          await service.stop();
          services.forget(service);
        },
      };
    },
  });
  return { report: outboxDrainToReport(result, config, context.envFacts, events) };
}

export function outboxDrainToReport(
  result: Record<string, unknown>,
  config: Config,
  environment: Record<string, string>,
  events: number,
): BenchReport {
  const num = (key: string) => (typeof result[key] === "number" ? (result[key] as number) : -1);
  const confirm = (result.confirmLatencySeconds ?? {}) as Record<string, number | undefined>;
  const ms = (seconds: number | undefined) =>
    seconds === undefined ? -1 : Math.round(seconds * 1e6) / 1e3;
  const received = num("received");
  const retries = num("publishRetries");
  const deadLetters = num("deadLetters");
  // Confirmed publishes, copies included: a republish after a failed stream acknowledgement
  // counts no retry, and its copy may reach the sink only after the counts were read (or,
  // with a queued sink, never be read at all), so this is what shows it.
  const published = num("published");
  const durabilityTimeouts = num("durabilityTimeouts");
  // No sample proves nothing: under aof-replicated a missing one fails too.
  const replicaConnected =
    config.durability !== "aof-replicated" ||
    (num("replicaSamples") > 0 && num("minReplicasConnected") >= 1);
  const extra: BenchReport["extra"] = {
    window: config.outboxWindow,
    readCount: config.outboxReadCount,
    backlogWriteSeconds: num("backlogWriteSeconds"),
    outboxStartSeconds: num("outboxStartSeconds"),
    firstReadSeconds: num("firstReadSeconds"),
    sink: result.sink === "queued" ? "queued" : "live",
    firstEventSeconds: num("firstEventSeconds"),
    lastEventSeconds: num("lastEventSeconds"),
    sinkReadSeconds: num("sinkReadSeconds"),
    unroutable: num("unroutable"),
    foreignMessages: num("foreignMessages"),
    confirmLatencyNote:
      "from the outbox's confirm histogram, ten buckets a decade: each percentile is its bucket's upper bound (at most 28 % above the true value), capped at the max",
  };
  return {
    boundary: "outbox-drain",
    boundaryStatement: `a backlog of N events already in the partition's Valkey stream -> outbox (lease, XREADGROUP, publish with confirms in a sliding window, XACK+XDEL of the confirmed prefix) -> event exchanges -> ${sinkQueueStatement}; timer runs from the outbox's first read (the last poll, every 5 ms, that saw its consumer group read nothing) until XLEN is 0 and ${
      result.sink === "queued"
        ? "the sink's queue holds every event (read by the sink and checked after the timed window)"
        : "the sink, reading throughout, has received every event"
    }`,
    durability: `${config.durability} (checked at outbox boot; under aof-replicated the replica is sampled every 250 ms through the drain, and the outbox may count no durability timeout); the stream is acknowledged only after broker confirms`,
    workload: `${events} events of the alternating mix (rested, filled, filled, deal)`,
    unit: "events",
    commands: events,
    warmup: 0,
    seconds: num("drainSeconds"),
    commandsPerSecond: num("eventsPerSecond"),
    latencyMs: {
      p50: ms(confirm.p50),
      p95: ms(confirm.p95),
      p99: ms(confirm.p99),
      p999: ms(confirm.p999),
      max: ms(confirm.max),
    },
    invariants: {
      ok:
        received === events &&
        published === events &&
        num("duplicates") === 0 &&
        retries === 0 &&
        deadLetters === 0 &&
        durabilityTimeouts === 0 &&
        replicaConnected,
      eventsReceivedBySinks: received,
      eventsExpected: events,
      eventsPublished: published,
      duplicatesReceived: num("duplicates"),
      outboxRetries: retries,
      outboxDeadLetters: deadLetters,
      outboxDurabilityTimeouts: durabilityTimeouts,
      ...(config.durability === "aof-replicated"
        ? { replicaConnectedThroughout: replicaConnected, replicaSamples: num("replicaSamples") }
        : {}),
    },
    environment,
    extra,
  };
}
