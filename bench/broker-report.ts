/**
 * The broker boundary's report: the broker alone, carrying the conductor's command traffic
 * (broker-floor.ts) or the outbox's event traffic (broker-event-floor.ts).
 */
import type { Config } from "../src/config/schema";
import { runBrokerEventFloor } from "./broker-event-floor";
import { runBrokerFloor } from "./broker-floor";
import type { BenchReport } from "./report";
import {
  intFlag,
  round,
  type StackContext,
  type StackReport,
  sinkQueueStatement,
} from "./stack-boundary";

/** `matchd bench broker`: the conductor's broker traffic alone, or the outbox's (--flow events). */
export async function brokerReport(context: StackContext): Promise<StackReport> {
  const { config, flags, progress } = context;
  const environment = context.envFacts;
  if (flags.get("--flow") === "events")
    return { report: await brokerEventReport(config, flags, environment, progress) };
  return { report: await brokerCommandReport(config, flags, environment, progress) };
}

/** The conductor's traffic: commands through a quorum queue to a consumer that only acks. */
export async function brokerCommandReport(
  config: Config,
  flags: ReadonlyMap<string, string>,
  environment: Record<string, string>,
  progress: (line: string) => void,
): Promise<BenchReport> {
  const seed = intFlag(flags, "--seed", 1);
  let commands = intFlag(flags, "--commands", 40_000);
  const warmup = intFlag(flags, "--warmup", 2000);
  const rate = flags.has("--rate") ? intFlag(flags, "--rate", 0) : undefined;
  // flag-check refused --duration without --rate.
  if (flags.has("--duration") && rate !== undefined)
    commands = Math.round(rate * intFlag(flags, "--duration", 0));
  const result = await runBrokerFloor({
    rate,
    brokerUrl: config.brokerUrl,
    commands,
    warmup,
    seed,
    prefetch: config.prefetch,
    ackEvery: config.batchMax,
    progress,
  });
  return {
    boundary: "broker",
    boundaryStatement: `the broker alone: publish with confirms -> ${result.queueType} queue with single active consumer (as matching:commands.p<N>) -> consumer that only acknowledges (one multiple-ack per batch of up to ${config.batchMax}, prefetch ${config.prefetch}); no datastore, no matching. The ceiling of the conductor boundary on this broker and machine`,
    durability: "broker only: persistent messages in a quorum queue; no datastore involved",
    workload: `alternating command bodies (${result.bodyBytes} bytes on average)`,
    commands,
    warmup,
    seconds: round(result.seconds, 3),
    commandsPerSecond: Math.round(result.commandsPerSecond),
    latencyMs: result.latencyMs,
    invariants: {
      ok:
        result.received === commands + warmup &&
        result.duplicates === 0 &&
        result.outOfOrder === 0 &&
        result.queueEmptyAfter,
      received: result.received,
      expected: commands + warmup,
      duplicates: result.duplicates,
      outOfOrder: result.outOfOrder,
      queueEmptyAfter: result.queueEmptyAfter,
    },
    environment,
    extra: {
      latencyMeasures:
        rate === undefined
          ? "publish to delivery at the consumer; closed loop publishes the whole run at once, so this is mostly the backlog"
          : "scheduled send to delivery at the consumer",
      offered: rate === undefined ? "closed loop" : `${rate}/s`,
      ...(rate === undefined ? {} : { sendLagMs: JSON.stringify(result.sendLagMs) }),
    },
  };
}

/** `matchd bench broker --flow events`: the outbox's broker traffic alone (see broker-event-floor). */
async function brokerEventReport(
  config: Config,
  flags: ReadonlyMap<string, string>,
  environment: Record<string, string>,
  progress: (line: string) => void,
): Promise<BenchReport> {
  const events = intFlag(flags, "--events", intFlag(flags, "--commands", 100_000));
  const result = await runBrokerEventFloor({
    brokerUrl: config.brokerUrl,
    events,
    window: config.outboxWindow,
    progress,
  });
  return {
    boundary: "broker",
    boundaryStatement: `the broker alone, carrying the outbox's traffic: the outbox's publisher (one confirm channel, persistent, mandatory, messageId, type, x-partition-offset header, up to ${config.outboxWindow} unconfirmed) -> event exchanges -> ${sinkQueueStatement}; no datastore, no stream. The ceiling of the outbox-drain boundary on this broker and machine`,
    durability: "broker only: persistent messages, publisher confirms; no datastore involved",
    workload: `${events} events of the alternating mix (rested, filled, filled, deal), ${result.bodyBytes} bytes on average`,
    unit: "events",
    commands: events,
    warmup: 0,
    seconds: round(result.seconds, 3),
    commandsPerSecond: Math.round(result.eventsPerSecond),
    latencyMs: result.confirmLatencyMs,
    invariants: {
      ok: result.received === events && result.duplicates === 0 && result.notAcked === 0,
      received: result.received,
      expected: events,
      duplicates: result.duplicates,
      notAcked: result.notAcked,
    },
    environment,
    extra: {
      flow: "events",
      window: String(config.outboxWindow),
      latencyMeasures: "publish to broker confirm, per event",
    },
  };
}
