/**
 * The pipeline boundaries (conductor, full-pipeline, round-trip): publishes a
 * deterministic workload to the partition's command queue, closed loop or at a fixed
 * offered rate, and measures until every command is durably processed (and, for the
 * full pipeline, every event has reached the sink queues), checking invariants.
 */
import type { ChannelModel, ConfirmChannel } from "amqplib";
import { fetchResult } from "../src/cli/client/queries";
import type { TraceRecord } from "../src/conductor/trace";
import type { Config } from "../src/config/schema";
import type { CommandEnvelope } from "../src/domain/index";
import { connectBroker } from "../src/infra/amqp/connect";
import { FramePublisher } from "../src/infra/amqp/fast-publish";
import { allEventExchanges, commandExchange, commandQueue } from "../src/infra/amqp/topology";
import { gcMetricName, observeCollections } from "../src/infra/gc-observer";
import { bearerHeaders } from "../src/infra/http/bearer";
import { createValkey, parseInfo, type Valkey } from "../src/infra/valkey/client";
import { listedReplicas } from "../src/infra/valkey/fsync-policy";
import { partitionKeys } from "../src/infra/valkey/keys";
import { AofRewriteWatch, describeRewrites } from "./aof-rewrites";
import { LatencyHistogram } from "./histogram";
import { LeanConsumer } from "./lean-consumer";
import { sleepUntil } from "./pace";
import { alignClock, bodyAtSend } from "./pipeline-clock";
import { checkReplay, settleDeadlines, type WholeRunCounts } from "./pipeline-clock-checks";
import { type PipelineCommands, preparePipelineCommands } from "./pipeline-commands";
import { PipelineCompletions } from "./pipeline-completions";
import { PipelineSampler } from "./pipeline-sampler";
import { CpuWatch } from "./process-cpu";
import { type QueryLoadResult, startQueryLoad } from "./query-load";
import type { Span, TimelinePoint } from "./series-recorder";
import { fetchMetrics, metricNumber } from "./services";
import { describeTrace, type TracedCommand } from "./trace-breakdown";

export type PipelineBoundary = "conductor" | "full-pipeline" | "round-trip";

export interface PipelineOptions {
  boundary: PipelineBoundary;
  config: Config;
  datastoreUrl: string;
  brokerUrl: string;
  conductorUrl: string;
  outboxUrl?: string;
  workload: string;
  commands: number;
  warmup: number;
  seed: number;
  /** Offered commands per second; undefined = closed loop (as fast as it goes). */
  rate?: number;
  /** The exchange workload's lifecycle orders on the wall clock (needs a rate): --clock wall. */
  wallClock?: boolean;
  /** Loops sending the conductor's HTTP queries during the timed run (see query-load.ts). */
  queryConnections?: number;
  /**
   * Forces an AOF rewrite halfway on every server that has not rewritten in the run (the
   * default): a run must cross one. False leaves rewrites to the data's growth.
   */
  forceRewrites?: boolean;
  progress: (line: string) => void;
}

export interface PipelineResult {
  commands: number;
  seconds: number;
  latency: LatencyHistogram;
  publishLatency: LatencyHistogram;
  timeline: TimelinePoint[];
  /** The AOF rewrites in flight during the timed run, in its seconds. */
  spans: Span[];
  /** Latency of the commands in flight during a rewrite, and of the others. */
  rewriteSplit: { during: LatencyHistogram; outside: LatencyHistogram };
  invariants: { ok: boolean; [check: string]: boolean | number | string };
  /** The names in `invariants` that are checks (pass unless `<name>Failed`); the rest is evidence. */
  checks: string[];
  facts: Record<string, number | string | boolean>;
  stages: Record<string, unknown>;
  /** The side-door load's figures, when one ran. */
  queries?: QueryLoadResult;
}

/** What a run's steps share: its commands, their completions, and its connections. */
interface PipelineRun {
  options: PipelineOptions;
  commands: PipelineCommands;
  done: PipelineCompletions;
  wantEvents: boolean;
  valkey: Valkey;
  connection: ChannelModel;
  publisher: ConfirmChannel;
  consumers: LeanConsumer[];
  publishLatency: LatencyHistogram;
  /** Publishes command `i`, counted as sent at `at` (its scheduled time in open loop). */
  publish: (i: number, at?: number) => Promise<void>;
  /** Waits for `done`, completing silent commands meanwhile; throws past `limitMs`. */
  waitFor: (
    what: string,
    ready: () => boolean | Promise<boolean>,
    limitMs: number,
  ) => Promise<void>;
}

export async function runPipelineBench(options: PipelineOptions): Promise<PipelineResult> {
  const run = await openPipelineRun(options);
  const { done, commands, valkey } = run;
  const counted = await conductorCounter(options.conductorUrl);
  const initial = {
    conductor: await fetchMetrics(options.conductorUrl),
    outbox: options.outboxUrl ? await fetchMetrics(options.outboxUrl) : {},
  };
  await warmUp(run);
  const base = {
    conductor: await counted(commands.timedFrom),
    outbox: options.outboxUrl ? await fetchMetrics(options.outboxUrl) : {},
    eventsReceived: done.eventsReceived,
  };
  const timed = await timedRun(run);
  const created = "matching_events_created_total";
  await settleDeadlines(
    run,
    async () =>
      metricNumber(await fetchMetrics(options.conductorUrl), created) -
      metricNumber(initial.conductor, created),
    run.waitFor,
  );
  const conductor = await counted(commands.bodies.length);
  const outbox = options.outboxUrl ? await fetchMetrics(options.outboxUrl) : {};
  const delta = (key: string, now = conductor, before = base.conductor) =>
    metricNumber(now, key) - metricNumber(before, key);
  const outboxDelta = (key: string) => delta(key, outbox, base.outbox);
  const wholeRun = {
    conductor: (key: string) => delta(key, conductor, initial.conductor),
    outbox: (key: string) => delta(key, outbox, initial.outbox),
  };
  const collections = {
    conductor: delta(gcMetricName),
    ...(options.outboxUrl === undefined ? {} : { outbox: outboxDelta(gcMetricName) }),
    bench: timed.benchCollections,
  };
  const { invariants, checks } = await checkPipeline(run, timed.sampler, {
    delta,
    outboxDelta,
    wholeRun,
    eventsReceivedTimed: done.eventsReceived - base.eventsReceived,
  });
  const facts = await pipelineFacts(run, timed, collections);
  const stageKeys = Object.keys(conductor).filter((k) => k.startsWith("matching_stage_"));
  const stages: Record<string, unknown> = {};
  for (const key of stageKeys) stages[key] = conductor[key];
  stages.matching_batch_size = conductor.matching_batch_size;
  if (options.outboxUrl)
    stages.matching_outbox_confirm_latency_seconds = outbox.matching_outbox_confirm_latency_seconds;
  for (const consumer of run.consumers) await consumer.close().catch(() => undefined);
  await run.connection.close().catch(() => undefined);
  valkey.disconnect();
  return {
    commands: options.commands,
    seconds: timed.seconds,
    latency: done.latency,
    publishLatency: run.publishLatency,
    timeline: timed.sampler.timeline(done.recorder.series().timeline, timed.startedAt),
    spans: timed.rewrites.spans(),
    rewriteSplit: done.latencyAround(
      timed.rewrites.spans().map((span) => ({
        from: timed.startedAt + span.fromSeconds * 1000,
        to: timed.startedAt + span.toSeconds * 1000,
      })),
    ),
    invariants,
    checks,
    stages,
    ...(timed.queries === undefined ? {} : { queries: timed.queries }),
    facts,
  };
}

/** The run's commands, connections and sinks; nothing is sent yet. */
async function openPipelineRun(options: PipelineOptions): Promise<PipelineRun> {
  const { config, boundary } = options;
  const wantEvents = boundary === "full-pipeline";
  // The full pipeline completes a command when all its events reached the sinks (each event
  // says how many its command emitted), so it needs no RPC reply traffic.
  const useReplies = !wantEvents;
  const commands = preparePipelineCommands(options);
  const done = new PipelineCompletions(commands, useReplies, options.commands, config.partition);
  const valkey = createValkey(options.datastoreUrl, {
    name: "matchd-bench",
    slotKey: partitionKeys(config.partition).ownerEpoch,
  });
  const connection = await connectBroker(options.brokerUrl, "matchd-bench");
  const publisher: ConfirmChannel = await connection.createConfirmChannel();
  // Pre-encoded frames: the producer's own CPU competes with the services on this machine.
  const frames = new FramePublisher(publisher);
  const consumers = await openConsumers(options, done, useReplies, wantEvents);
  const replyQueue = useReplies ? consumers[0]!.queue : undefined;
  const publishLatency = new LatencyHistogram();
  const queue = commandQueue(config.partition);
  const publish = async (i: number, at?: number): Promise<void> => {
    const started = performance.now();
    done.sent(i, at ?? started);
    const { clock } = commands;
    // What went out is what the replay applies.
    if (clock?.dated.has(i)) commands.bodies[i] = bodyAtSend(clock, commands.bodies[i]!);
    const ok = frames.publish(commandExchange, queue, commands.bodies[i]!, false, {
      persistent: true,
      contentType: "application/json",
      replyTo: replyQueue,
      correlationId: commands.commandIds[i]!,
      messageId: commands.commandIds[i]!,
      timestamp: Date.now(),
    });
    publishLatency.record((performance.now() - started) * 1e6);
    if (!ok) await new Promise((resolve) => publisher.once("drain", resolve));
  };
  const waitFor = async (
    what: string,
    ready: () => boolean | Promise<boolean>,
    limitMs: number,
  ) => {
    const deadline = performance.now() + limitMs;
    while (!(await ready())) {
      await settleSilent(options, done);
      if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      const failed = consumers.find((consumer) => consumer.failed)?.failed;
      if (failed)
        throw new Error(`the bench's consumer failed waiting for ${what}: ${failed.message}`);
      await Bun.sleep(10);
    }
  };
  return {
    ...{ options, commands, done, wantEvents, valkey, connection, publisher, consumers },
    ...{ publishLatency, publish, waitFor },
  };
}

/**
 * Replies and events come in through the benches' lean consumer (see lean-consumer.ts):
 * amqplib's receive path cost the bench more CPU per message than anything else it does.
 * The replies' consumer, when there is one, comes first.
 */
async function openConsumers(
  options: PipelineOptions,
  done: PipelineCompletions,
  useReplies: boolean,
  wantEvents: boolean,
): Promise<LeanConsumer[]> {
  const consumers: LeanConsumer[] = [];
  if (useReplies) {
    consumers.push(
      await LeanConsumer.open({
        url: options.brokerUrl,
        name: "matchd-bench-replies",
        exchanges: [],
        onDelivery: done.replied,
      }),
    );
  }
  if (wantEvents) {
    // One queue bound to every event exchange: exclusive, or a quorum queue on a cluster.
    consumers.push(
      await LeanConsumer.open({
        url: options.brokerUrl,
        name: "matchd-bench-sink",
        exchanges: allEventExchanges,
        onDelivery: (message) => done.event(message, commandEventsOf),
      }),
    );
  }
  return consumers;
}

/**
 * When only silent commands are left of what was published and no event is due, nothing would
 * complete them: the last one's stored result says they were all processed. On the wall clock
 * the first command with no event yet is silent once its stored result says it emitted none.
 */
async function settleSilent(options: PipelineOptions, done: PipelineCompletions): Promise<void> {
  const quiet = done.quietLeft();
  if (quiet !== undefined) {
    const result = await storedResult(options, done.commandIdOf(quiet));
    if (result?.events === 0) done.settleQuiet(quiet, performance.now());
    return;
  }
  const last = done.silentLeft();
  if (last === undefined) return;
  if ((await storedResult(options, last)) !== undefined) done.settleSilent(performance.now());
}

/** A command's stored result from the conductor, or undefined while it has none. */
function storedResult(options: PipelineOptions, commandId: string) {
  // fetchResult throws for a result not stored yet (404), as for a failed request.
  return fetchResult(options.conductorUrl, commandId, options.config.httpToken).catch(
    () => undefined,
  );
}

/**
 * The conductor counts a command once its batch is durable and acknowledged; the outbox may
 * deliver that batch's events a moment earlier. So each phase's metrics are read only once the
 * conductor has counted every command sent so far (30 s at most: past it the snapshot is taken
 * anyway, and the invariants report the shortfall).
 */
async function conductorCounter(conductorUrl: string) {
  const processed = "matching_commands_processed_total";
  const atStart = metricNumber(await fetchMetrics(conductorUrl), processed);
  return async (commands: number): Promise<Record<string, unknown>> => {
    const deadline = performance.now() + 30_000;
    for (;;) {
      const metrics = await fetchMetrics(conductorUrl);
      const counted = metricNumber(metrics, processed);
      if (counted - atStart >= commands || performance.now() > deadline) return metrics;
      await Bun.sleep(10);
    }
  };
}

/** Phase 1, not timed: the prefill and the warm-up, then (full pipeline) the stream drained. */
async function warmUp(run: PipelineRun): Promise<void> {
  const { options, commands, done, valkey } = run;
  const timedFrom = commands.timedFrom;
  if (timedFrom === 0) return;
  options.progress(
    `warm-up: ${commands.prefillCount} prefill + ${options.warmup} warm-up commands`,
  );
  if (commands.clock !== undefined) alignClock(commands.clock, 0, Date.now());
  for (let i = 0; i < timedFrom; i++) await run.publish(i);
  await run.waitFor("warm-up commands", () => done.completed >= timedFrom, 120_000);
  if (!run.wantEvents) return;
  const events = partitionKeys(options.config.partition).events;
  await run.waitFor(
    "warm-up events drained",
    async () => (await valkey.xlen(events)) === 0,
    60_000,
  );
}

/**
 * Phase 2, timed: the commands sent (closed loop, or each at its scheduled time) until every
 * one completed, sampled meanwhile (queue, stream, replicas, the services' counters, CPU, AOF
 * rewrites: forced halfway where none ran), with the side-door query load if asked for.
 */
async function timedRun(run: PipelineRun) {
  const { options, done, valkey } = run;
  const keys = partitionKeys(options.config.partition);
  let benchCollections = 0;
  let rewrites: AofRewriteWatch | undefined;
  const sampler = new PipelineSampler(
    {
      probe: await run.connection.createChannel(),
      queue: commandQueue(options.config.partition),
      valkey,
      streamKey: keys.events,
      services: [
        { name: "conductor", url: options.conductorUrl },
        ...(options.outboxUrl === undefined ? [] : [{ name: "outbox", url: options.outboxUrl }]),
      ],
      benchCollections: () => benchCollections,
    },
    async () => {
      await rewrites?.sample();
    },
  );
  rewrites = await AofRewriteWatch.open(valkey);
  const watch = rewrites;
  let rewritesForced: Promise<void> | undefined;
  done.onHalfway = () => {
    if (options.forceRewrites === false) return;
    rewritesForced = watch.forceWhereNone().catch((error: unknown) => {
      options.progress(`BGREWRITEAOF failed: ${(error as Error).message}`);
    });
  };
  const cpu = CpuWatch.open(await cpuTargets(options, valkey));
  const stopObserving = observeCollections(() => benchCollections++);
  options.progress(
    `${options.boundary}: timing ${options.commands} commands, ${options.rate === undefined ? "closed loop" : `${options.rate}/s offered`}`,
  );
  const startedAt = performance.now();
  const { clock } = run.commands;
  if (clock !== undefined) alignClock(clock, options.warmup, performance.timeOrigin + startedAt);
  done.recorder.start(startedAt * 1e6);
  rewrites.startsAt(startedAt);
  const queryLoad = startQueries(run);
  const progressTimer = setInterval(() => {
    const elapsed = (performance.now() - startedAt) / 1000;
    options.progress(
      `${options.boundary}: ${done.completedTimed}/${options.commands} complete, ${Math.round(done.completedTimed / Math.max(elapsed, 0.001))} cmd/s, ${elapsed.toFixed(1)} s`,
    );
  }, 1000);
  let queryResult: Promise<QueryLoadResult> | undefined;
  try {
    await publishTimed(run, startedAt);
    await run.publisher.waitForConfirms();
    const all = () => done.completedTimed >= options.commands;
    await run.waitFor("every command's durable result", all, 600_000);
    if (run.wantEvents) {
      const drained = async () => (await valkey.xlen(keys.events)) === 0;
      await run.waitFor("the events stream drained", drained, 120_000);
    }
  } finally {
    clearInterval(progressTimer);
    // Stopped however the run ended: its loops would otherwise outlive it.
    queryResult = queryLoad?.stop();
  }
  const seconds = (performance.now() - startedAt) / 1000;
  const queries = await queryResult;
  stopObserving();
  await rewritesForced;
  const rewriteCounts = await rewrites.close();
  const cpuUsed = cpu.close();
  await sampler.stop();
  return {
    ...{ seconds, startedAt, queries, rewrites, rewriteCounts, cpuUsed, sampler },
    benchCollections,
  };
}

type TimedRun = Awaited<ReturnType<typeof timedRun>>;

/** The timed commands: back to back, or each at its scheduled time (no coordinated omission). */
async function publishTimed(run: PipelineRun, startedAt: number): Promise<void> {
  const { options, commands } = run;
  const { timedFrom, bodies } = commands;
  if (options.rate === undefined) {
    for (let i = timedFrom; i < bodies.length; i++) await run.publish(i);
    return;
  }
  const intervalMs = 1000 / options.rate;
  const due = (i: number) => startedAt + (i - timedFrom) * intervalMs;
  for (let i = timedFrom; i < bodies.length; ) {
    if (performance.now() < due(i)) {
      await sleepUntil(due(i));
      continue;
    }
    // Latency counts from the scheduled time, not the actual send.
    while (i < bodies.length && due(i) <= performance.now()) {
      await run.publish(i, due(i));
      i++;
    }
  }
}

/** The conductor's queries sent back to back during the timed run, when asked for. */
function startQueries(run: PipelineRun) {
  const { options, commands, done } = run;
  if (options.queryConnections === undefined) return undefined;
  return startQueryLoad({
    conductorUrl: options.conductorUrl,
    connections: options.queryConnections,
    token: options.config.httpToken,
    pairIds: commands.workload.pairIds,
    sample: () => {
      const sentSoFar = Math.max(0, done.completed - 1);
      const body = commands.bodies[Math.floor(Math.random() * (sentSoFar + 1))];
      if (body === undefined) return undefined;
      const command = JSON.parse(body.toString()) as CommandEnvelope;
      // The workloads' commands all name an order (place, cancel or amend).
      const orderId = "id" in command.payload ? command.payload.id : "";
      return { commandId: command.commandId, orderId };
    },
  });
}

/** Phase 3: every invariant, against the reference engine and the services' own counts. */
async function checkPipeline(
  run: PipelineRun,
  sampler: PipelineSampler,
  counts: {
    delta: (key: string) => number;
    outboxDelta: (key: string) => number;
    /** Since before the prefill: a wall-clock run's replay covers every command. */
    wholeRun: WholeRunCounts;
    eventsReceivedTimed: number;
  },
) {
  const { options, commands, done, valkey } = run;
  const { delta, outboxDelta, eventsReceivedTimed } = counts;
  const keys = partitionKeys(options.config.partition);
  const invariants: PipelineResult["invariants"] = { ok: true };
  const checks: string[] = [];
  const check = (name: string, value: number | string | boolean, ok: boolean) => {
    invariants[name] = value;
    checks.push(name);
    if (!ok) {
      invariants.ok = false;
      invariants[`${name}Failed`] = true;
    }
  };
  const processed = delta("matching_commands_processed_total");
  const failures = delta("matching_command_failures_total");
  const eventsCreated = delta("matching_events_created_total");
  const durabilityTimeouts = delta("matching_durability_timeouts_total");
  check("commandsProcessed", processed, processed === options.commands);
  check("commandFailures", failures, failures === 0);
  check("durabilityTimeouts", durabilityTimeouts, durabilityTimeouts === 0);
  const replay =
    commands.clock === undefined
      ? undefined
      : await checkReplay(
          { valkey, commands, done, partition: options.config.partition },
          counts.wholeRun,
          check,
          invariants,
        );
  if (replay === undefined) {
    // The reference engine applied every command as it was made (pipeline-commands.ts).
    check("rejectedResults", done.failedReplies, done.failedReplies === commands.referenceRejected);
    invariants.rejectedExpected = commands.referenceRejected;
    check("eventsCreated", eventsCreated, eventsCreated === commands.referenceEventsTimed);
    invariants.eventsExpected = commands.referenceEventsTimed;
  }
  if (options.config.durability === "aof-replicated") {
    // No successful sample proves nothing: that fails too.
    const connected = sampler.replicaSamples > 0 && sampler.minReplicas >= 1;
    check("replicaConnectedThroughout", connected, connected);
    invariants.replicaSamples = sampler.replicaSamples;
  }
  if (run.wantEvents) {
    const retries = outboxDelta("matching_outbox_publish_retries_total");
    const deadLetters = outboxDelta("matching_outbox_dead_letter_total");
    check("outboxRetries", retries, retries === 0);
    check("outboxDeadLetters", deadLetters, deadLetters === 0);
    // The outbox waits for its reads to be durable too; a timed-out wait publishes nothing and
    // counts no retry, so only this counter shows a stall on missing replica acknowledgements.
    const outboxTimeouts = outboxDelta("matching_outbox_durability_timeouts_total");
    check("outboxDurabilityTimeouts", outboxTimeouts, outboxTimeouts === 0);
    if (replay === undefined) {
      check("eventsReceivedBySinks", eventsReceivedTimed, eventsReceivedTimed === eventsCreated);
      // A copy republished after a failed stream acknowledgement counts no retry and may
      // reach the sink after these counts are read: the outbox's confirmed publishes show it.
      const published = outboxDelta("matching_outbox_events_published_total");
      check("eventsPublished", published, published === eventsCreated);
    }
    check("duplicateEventsReceived", done.duplicateEvents, done.duplicateEvents === 0);
    const xlen = await valkey.xlen(keys.events);
    check("streamLengthAtEnd", xlen, xlen === 0);
  }
  if (options.workload === "alternating") {
    let depth = 0;
    for (const pairId of commands.workload.pairIds) {
      depth += await valkey.zcard(keys.bookRates(pairId, "bid"));
      depth += await valkey.zcard(keys.bookRates(pairId, "ask"));
    }
    check("remainingBookDepth", depth, depth === 0);
  }
  const digest = (await fetch(`${options.conductorUrl}/digest`).then(
    (r) => r.json(),
    () => ({}),
  )) as { digest?: string; restingOrders?: number };
  // The conductor's books must be exactly what the domain made of the same commands.
  const expectedDigest = replay?.digest ?? commands.reference.digest();
  check("finalBookDigest", digest.digest ?? "unavailable", digest.digest === expectedDigest);
  invariants.expectedBookDigest = expectedDigest;
  invariants.restingOrdersAtEnd = digest.restingOrders ?? -1;
  return { invariants, checks };
}

/** The run's facts for the report: the mix, the book, fills, CPU, backlogs, rewrites, GC. */
async function pipelineFacts(
  run: PipelineRun,
  timed: TimedRun,
  collections: Record<string, number>,
): Promise<PipelineResult["facts"]> {
  const { options, commands, done } = run;
  const { rewriteCounts, cpuUsed, sampler } = timed;
  const uncrossed = [
    ...rewriteCounts
      .filter((c) => !(c.rewrites >= 1))
      .map((c) => `no AOF rewrite on the ${c.server}`),
    ...Object.entries(collections)
      .filter(([, count]) => !(count >= 1))
      .map(([process]) => `no garbage collection seen in the ${process}`),
  ];
  const trace = await tracedCommands(options.conductorUrl, options.config.httpToken, (id) => {
    const i = done.index(id);
    if (i === undefined || i < commands.timedFrom || !done.isComplete(i)) return undefined;
    const end = done.endOf(i);
    return {
      sentMs: performance.timeOrigin + done.sentAt[i]!,
      endMs: performance.timeOrigin + end,
    };
  });
  return {
    workloadDescription: commands.workload.description,
    commandMix: [...commands.mix]
      .map(([kind, count]) => `${kind} ${((100 * count) / options.commands).toFixed(1)}%`)
      .join(", "),
    bookAtEnd: await describeBook(options.conductorUrl, commands.workload.pairIds),
    fillCounts: run.wantEvents
      ? fillDistribution(done.fills.subarray(commands.timedFrom))
      : "not observed (no event sinks)",
    cpuSeconds: JSON.stringify(cpuUsed.seconds),
    ...(cpuUsed.notMeasured.length === 0
      ? {}
      : {
          cpuNotMeasured: `${cpuUsed.notMeasured.join(", ")} (not found listening on this machine)`,
        }),
    maxQueueDepth: Math.max(0, ...sampler.samples.map((s) => s.queueDepth)),
    maxStreamLength: Math.max(0, ...sampler.samples.map((s) => s.streamLength)),
    aofRewrites: describeRewrites(rewriteCounts),
    traceBreakdown: trace,
    gcCollections: `${Object.entries(collections)
      .map(([process, count]) => `${process} ${count}`)
      .join(", ")} (observed: a lower bound)`,
    crossed:
      uncrossed.length === 0
        ? "an AOF rewrite on every server and garbage collections in every process"
        : `did not cross: ${uncrossed.join("; ")}`,
  };
}

/** Share of timed commands by number of fills (deal events): "0 fills 50%, 1 fill 50%". */
function fillDistribution(fills: Int32Array): string {
  const counts = new Map<string, number>();
  for (const n of fills) {
    const bucket = n <= 2 ? String(n) : n <= 10 ? "3-10" : ">10";
    counts.set(bucket, (counts.get(bucket) ?? 0) + 1);
  }
  return [...counts]
    .sort()
    .map(([bucket, count]) => `${bucket} fills ${((100 * count) / fills.length).toFixed(1)}%`)
    .join(", ");
}

/** The book at the end, from the conductor: markets, resting orders, levels, concentration. */
async function describeBook(conductorUrl: string, pairIds: readonly number[]): Promise<string> {
  let orders = 0;
  let levels = 0;
  let nearTouch = 0;
  for (const pairId of pairIds) {
    const depth = (await fetch(`${conductorUrl}/books/${pairId}?depth=1000`).then(
      (r) => r.json(),
      () => ({ bids: [], asks: [] }),
    )) as { bids: { orders: number }[]; asks: { orders: number }[] };
    for (const side of [depth.bids, depth.asks]) {
      levels += side.length;
      side.forEach((level, i) => {
        orders += level.orders;
        if (i < 5) nearTouch += level.orders;
      });
    }
  }
  if (orders === 0) return `${pairIds.length} market(s), empty book`;
  return `${pairIds.length} market(s), ${orders} resting orders on ${levels} levels (first 1000 per side), ${(orders / levels).toFixed(1)} orders/level, ${((100 * nearTouch) / orders).toFixed(0)}% within 5 levels of the touch`;
}

/** Reads the `commandEvents` extension the conductor appends as the envelope's last field. */
function commandEventsOf(body: Buffer): number {
  const text = body.toString("utf8", Math.max(0, body.length - 40));
  const match = /"commandEvents":(\d+)\}$/.exec(text);
  return match ? Number(match[1]) : -1;
}

export async function resetPartition(valkey: Valkey, partition: number): Promise<number> {
  const pattern = `${partitionKeys(partition).prefix}*`;
  let cursor = "0";
  let deleted = 0;
  do {
    const [next, keys] = await valkey.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) deleted += await valkey.del(...keys);
  } while (cursor !== "0");
  return deleted;
}

/**
 * Drops the commands left in the partition's queue by an earlier run (one interrupted
 * mid-run leaves thousands): a conductor would match them before this run's, into the books
 * the bench has just reset, and count them in its stage metrics. The bench owns the
 * partition it is pointed at, as resetPartition already assumes. Returns how many were
 * dropped; a queue that does not exist yet holds none.
 */
export async function purgeCommandQueue(brokerUrl: string, partition: number): Promise<number> {
  const connection = await connectBroker(brokerUrl, "matchd-bench-reset");
  try {
    const channel = await connection.createChannel();
    // A passive check of a missing queue closes the channel with 404 and emits 'error' too.
    channel.on("error", () => undefined);
    try {
      await channel.checkQueue(commandQueue(partition));
    } catch (error) {
      // 404: no such queue, so nothing to purge; anything else is a real failure.
      if ((error as { code?: unknown }).code === 404) return 0;
      throw error;
    }
    return (await channel.purgeQueue(commandQueue(partition))).messageCount;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/**
 * The conductor's trace joined with the bench's times, as one line (see trace-breakdown.ts);
 * a conductor that cannot be asked (an older build given by URL) leaves it unknown.
 */
async function tracedCommands(
  conductorUrl: string,
  token: string,
  bench: (commandId: string) => { sentMs: number; endMs: number } | undefined,
): Promise<string> {
  try {
    const response = await fetch(`${conductorUrl}/trace`, {
      headers: bearerHeaders(token),
    });
    if (response.status !== 200) return `unknown: /trace answered ${response.status}`;
    const { sampleEvery, records } = (await response.json()) as {
      sampleEvery: number;
      records: TraceRecord[];
    };
    const traced: TracedCommand[] = [];
    for (const record of records) {
      const times = bench(record.commandId);
      if (times !== undefined) traced.push({ ...record, ...times });
    }
    return describeTrace(traced, sampleEvery);
  } catch (error) {
    return `unknown: ${(error as Error).message}`;
  }
}

/** The servers and services whose CPU the run reports, each by the URL it listens on. */
async function cpuTargets(
  options: PipelineOptions,
  valkey: Valkey,
): Promise<{ name: string; url: string }[]> {
  const replicas = listedReplicas(parseInfo(await valkey.info("replication")));
  return [
    { name: "broker", url: options.brokerUrl },
    { name: "valkey primary", url: options.datastoreUrl },
    ...replicas.map(({ port }, i) => ({
      name: replicas.length === 1 ? "valkey replica" : `valkey replica ${i + 1}`,
      // Listed by the address the primary sees; the port alone finds the process here.
      url: `redis://127.0.0.1:${port}`,
    })),
    { name: "conductor", url: options.conductorUrl },
    ...(options.outboxUrl === undefined ? [] : [{ name: "outbox", url: options.outboxUrl }]),
  ];
}
