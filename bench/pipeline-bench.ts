/**
 * The pipeline boundaries (conductor, full-pipeline, round-trip): publishes a
 * deterministic workload to the partition's command queue, closed loop or at a fixed
 * offered rate, and measures until every command is durably processed (and, for the
 * full pipeline, every event has reached the sink queues), checking invariants.
 */
import type { ConfirmChannel } from "amqplib";
import type { TraceRecord } from "../src/conductor/trace";
import type { Config } from "../src/config/schema";
import { type CommandEnvelope, MatchingEngine } from "../src/domain/index";
import { connectBroker } from "../src/infra/amqp/connect";
import { FramePublisher } from "../src/infra/amqp/fast-publish";
import { allEventExchanges, commandExchange, commandQueue } from "../src/infra/amqp/topology";
import { gcMetricName, observeCollections } from "../src/infra/gc-observer";
import { bearerHeaders } from "../src/infra/http/bearer";
import { createValkey, parseInfo, type Valkey } from "../src/infra/valkey/client";
import { listedReplicas } from "../src/infra/valkey/fsync-policy";
import { partitionKeys } from "../src/infra/valkey/keys";
import { AofRewriteWatch, describeRewrites } from "./aof-rewrites";
import { SeenEvents } from "./event-dedup";
import { LatencyHistogram } from "./histogram";
import { LeanConsumer } from "./lean-consumer";
import { sleepUntil } from "./pace";
import { PipelineSampler } from "./pipeline-sampler";
import { CpuWatch } from "./process-cpu";
import { type QueryLoadResult, startQueryLoad } from "./query-load";
import { SeriesRecorder, type Span, type TimelinePoint } from "./series-recorder";
import { fetchMetrics, metricNumber } from "./services";
import { describeTrace, type TracedCommand } from "./trace-breakdown";
import { createWorkload } from "./workloads";

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
  /** Loops sending the conductor's HTTP queries during the timed run (see query-load.ts). */
  queryConnections?: number;
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
  invariants: { ok: boolean; [check: string]: boolean | number | string };
  /** The names in `invariants` that are checks (pass unless `<name>Failed`); the rest is evidence. */
  checks: string[];
  facts: Record<string, number | string | boolean>;
  stages: Record<string, unknown>;
  /** The side-door load's figures, when one ran. */
  queries?: QueryLoadResult;
}

export async function runPipelineBench(options: PipelineOptions): Promise<PipelineResult> {
  const { config, boundary } = options;
  const partition = config.partition;
  const keys = partitionKeys(partition);
  const queue = commandQueue(partition);
  const wantEvents = boundary === "full-pipeline";
  // The full pipeline completes a command when all its events reached the sinks (each
  // event says how many its command emitted), so it needs no RPC reply traffic.
  const useReplies = !wantEvents;

  const workload = createWorkload(options.workload, {
    seed: options.seed,
    partition,
    partitionCount: config.partitionCount,
  });
  const prefill = workload.prefill();
  const total = options.warmup + options.commands;
  const timedFrom = prefill.length + options.warmup;
  const bodies: Buffer[] = [];
  const commandIds: string[] = [];
  // The domain in-process on the same commands in the same order (the queue has one active
  // consumer, so that is the order the conductor applied them), as they are made: what it
  // refuses and the events it emits in the timed window are exactly what the conductor must
  // show. Exact for every workload: mixed refuses some commands by design, and multi-pair's
  // pairs left resting at the window's edges shift its event count away from 2 a command.
  // Applied now rather than replayed at the end: a long run (a soak) then holds only each
  // command's bytes, not its parsed envelope as well (2 KB a command and GC over it all).
  const reference = new MatchingEngine();
  let referenceRejected = 0;
  let referenceEventsTimed = 0;
  // Commands that emit no event (an unchanged amend, a cancel-all that finds nothing): no
  // event completes them, so the first event of a later command does (see completeSilent).
  const silent: number[] = [];
  const encode = (command: CommandEnvelope) => {
    const outcome = reference.apply(command);
    if (outcome.events.length === 0) silent.push(bodies.length);
    if (outcome.result.status === "rejected") referenceRejected++;
    if (bodies.length >= timedFrom) referenceEventsTimed += outcome.events.length;
    commandIds.push(command.commandId);
    bodies.push(Buffer.from(JSON.stringify(command)));
  };
  for (const command of prefill) encode(command);
  const mix = new Map<string, number>();
  for (let i = 0; i < total; i++) {
    const command = workload.next(i);
    if (i >= options.warmup) {
      const kind = commandKind(command);
      mix.set(kind, (mix.get(kind) ?? 0) + 1);
    }
    encode(command);
  }

  const valkey = createValkey(options.datastoreUrl, {
    name: "matchd-bench",
    slotKey: keys.ownerEpoch,
  });
  const connection = await connectBroker(options.brokerUrl, "matchd-bench");
  const publisher: ConfirmChannel = await connection.createConfirmChannel();
  // Pre-encoded frames: the producer's own CPU competes with the services on this machine.
  const frames = new FramePublisher(publisher);
  // Replies and events come in through the benches' lean consumer (see lean-consumer.ts):
  // amqplib's receive path cost the bench more CPU per message than anything else it does.
  const consumers: LeanConsumer[] = [];

  // State per command index.
  const sentAt = new Float64Array(bodies.length);
  const repliedAt = new Float64Array(bodies.length);
  const expectedEvents = new Int32Array(bodies.length).fill(-1);
  const receivedEvents = new Int32Array(bodies.length);
  const lastEventAt = new Float64Array(bodies.length);
  const fills = new Int32Array(bodies.length);
  const indexOf = new Map<string, number>();
  commandIds.forEach((commandId, i) => {
    indexOf.set(commandId, i);
  });

  const latency = new LatencyHistogram();
  const publishLatency = new LatencyHistogram();
  let completed = 0;
  let completedTimed = 0;
  let failedReplies = 0;
  const seen = new SeenEvents(bodies.length);
  let eventsReceived = 0;
  let duplicateEvents = 0;
  // Per-second throughput and latency of the timed commands, by completion time.
  const recorder = new SeriesRecorder({ intervalMs: 1000 });
  let timedStart = 0;

  // Set when the timed window opens; halfway through it, rewrites are forced where none ran.
  let rewrites: AofRewriteWatch | undefined;
  let rewritesForced: Promise<void> | undefined;
  const halfway = Math.max(1, Math.floor(options.commands / 2));
  // A command completes once: more events than its count says must not time it again.
  const completedOnce = new Uint8Array(bodies.length);
  const complete = (i: number) => {
    if (completedOnce[i] === 1) return;
    completedOnce[i] = 1;
    const end = useReplies ? repliedAt[i]! : lastEventAt[i]!;
    completed++;
    if (i < timedFrom) return;
    completedTimed++;
    if (completedTimed === halfway && rewrites !== undefined) {
      rewritesForced = rewrites.forceWhereNone().catch((error: unknown) => {
        options.progress(`BGREWRITEAOF failed: ${(error as Error).message}`);
      });
    }
    const ns = (end - sentAt[i]!) * 1e6;
    latency.record(ns);
    recorder.record(ns, end * 1e6);
  };
  // Events arrive in stream order, and the stream holds commands in queue order: a later
  // command's event means every earlier command is committed, its empty share of events too.
  let silentHead = 0;
  // Commands published so far, and the silent ones among them (publish goes in index order).
  let published = 0;
  let silentPublished = 0;
  const completeSilent = (before: number, now: number) => {
    while (silentHead < silent.length && silent[silentHead]! < before) {
      const i = silent[silentHead++]!;
      expectedEvents[i] = 0;
      lastEventAt[i] = now;
      complete(i);
    }
  };
  const isComplete = (i: number) =>
    useReplies
      ? repliedAt[i]! > 0
      : expectedEvents[i]! >= 0 && receivedEvents[i]! >= expectedEvents[i]!;

  let replyQueue: string | undefined;
  if (useReplies) {
    const replies = await LeanConsumer.open({
      url: options.brokerUrl,
      name: "matchd-bench-replies",
      exchanges: [],
      onDelivery: (message) => {
        const i = indexOf.get(message.correlationId ?? "");
        if (i === undefined || repliedAt[i]! > 0) return;
        const now = performance.now();
        repliedAt[i] = now;
        const result = JSON.parse(message.body.toString()) as { status: string; events: number };
        if (result.status === "rejected") failedReplies++;
        expectedEvents[i] = result.events;
        if (isComplete(i)) complete(i);
      },
    });
    consumers.push(replies);
    replyQueue = replies.queue;
  }

  if (wantEvents) {
    // One queue bound to every event exchange: exclusive, or a quorum queue on a cluster.
    const sink = await LeanConsumer.open({
      url: options.brokerUrl,
      name: "matchd-bench-sink",
      exchanges: allEventExchanges,
      onDelivery: (message) => {
        // Event ids are `<commandId>:<ordinal>:<type>`; every event carries one.
        const eventId = message.messageId;
        if (eventId === undefined) return;
        const colon = eventId.indexOf(":");
        const i = indexOf.get(eventId.slice(0, colon));
        // Events of other runs (a shared broker) are neither received, nor duplicates, nor
        // rejections here.
        if (i === undefined) return;
        if (!seen.isNew(eventId, i, colon)) {
          duplicateEvents++;
          return;
        }
        eventsReceived++;
        if (eventId.endsWith(":order.rejected.v1")) failedReplies++;
        if (eventId.endsWith(":deal.executed.v1")) fills[i]!++;
        receivedEvents[i]!++;
        if (expectedEvents[i]! < 0) expectedEvents[i] = commandEventsOf(message.body);
        const now = performance.now();
        if (now > lastEventAt[i]!) lastEventAt[i] = now;
        completeSilent(i, now);
        if (isComplete(i)) complete(i);
        // The last commands published (of the warm-up, or of the run) may be silent ones:
        // once the rest of what was published completed, no event of theirs can follow.
        if (completed + silentPublished - silentHead === published) completeSilent(published, now);
      },
    });
    consumers.push(sink);
  }

  /** `at`: when the command counts as submitted (its scheduled time in open loop). */
  const publish = async (i: number, at?: number): Promise<void> => {
    const started = performance.now();
    sentAt[i] = at ?? started;
    published = Math.max(published, i + 1);
    while (silentPublished < silent.length && silent[silentPublished]! < published) {
      silentPublished++;
    }
    const ok = frames.publish(commandExchange, queue, bodies[i]!, false, {
      persistent: true,
      contentType: "application/json",
      replyTo: useReplies ? replyQueue : undefined,
      correlationId: commandIds[i]!,
      messageId: commandIds[i]!,
      timestamp: Date.now(),
    });
    publishLatency.record((performance.now() - started) * 1e6);
    if (!ok) await new Promise((resolve) => publisher.once("drain", resolve));
  };

  /**
   * When only silent commands are left of what was published and no event is due, nothing
   * would complete them: the last one's stored result says they were all processed.
   */
  const settleSilent = async () => {
    if (silentHead === silentPublished || completed + silentPublished - silentHead !== published) {
      return;
    }
    const last = commandIds[silent[silentPublished - 1]!]!;
    const headers: Record<string, string> =
      config.httpToken === "" ? {} : { authorization: `Bearer ${config.httpToken}` };
    const stored = await fetch(`${options.conductorUrl}/commands/${encodeURIComponent(last)}`, {
      headers,
    }).catch(() => undefined);
    if (stored?.status === 200) completeSilent(published, performance.now());
  };
  const waitFor = async (what: string, done: () => boolean | Promise<boolean>, limitMs: number) => {
    const deadline = performance.now() + limitMs;
    while (!(await done())) {
      await settleSilent();
      if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      const failed = consumers.find((consumer) => consumer.failed)?.failed;
      if (failed)
        throw new Error(`the bench's consumer failed waiting for ${what}: ${failed.message}`);
      await Bun.sleep(10);
    }
  };

  // The conductor counts a command once its batch is durable and acknowledged; the
  // outbox may deliver that batch's events a moment earlier. So each phase's metrics are
  // read only once the conductor has counted every command sent so far.
  const processedAtStart = metricNumber(
    await fetchMetrics(options.conductorUrl),
    "matching_commands_processed_total",
  );
  const conductorCounted = async (commands: number) => {
    const deadline = performance.now() + 30_000;
    for (;;) {
      const metrics = await fetchMetrics(options.conductorUrl);
      const counted = metricNumber(metrics, "matching_commands_processed_total");
      // Past the deadline the snapshot is taken anyway: the invariants report the shortfall.
      if (counted - processedAtStart >= commands || performance.now() > deadline) return metrics;
      await Bun.sleep(10);
    }
  };

  // Phase 1: prefill and warm-up, not timed.
  if (timedFrom > 0) {
    options.progress(`warm-up: ${prefill.length} prefill + ${options.warmup} warm-up commands`);
    for (let i = 0; i < timedFrom; i++) await publish(i);
    await waitFor("warm-up commands", () => completed >= timedFrom, 120_000);
    if (wantEvents) {
      await waitFor(
        "warm-up events drained",
        async () => (await valkey.xlen(keys.events)) === 0,
        60_000,
      );
    }
  }
  const baseConductor = await conductorCounted(timedFrom);
  const baseOutbox = options.outboxUrl ? await fetchMetrics(options.outboxUrl) : {};
  const eventsReceivedBefore = eventsReceived;

  // Sampling: queue depth, stream length, replica presence and the services' counters.
  let benchCollections = 0;
  const sampler = new PipelineSampler(
    {
      probe: await connection.createChannel(),
      queue,
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
  const cpu = CpuWatch.open(await cpuTargets(options, valkey));
  const stopObserving = observeCollections(() => benchCollections++);

  // Phase 2: the timed run.
  options.progress(
    `${boundary}: timing ${options.commands} commands, ${options.rate === undefined ? "closed loop" : `${options.rate}/s offered`}`,
  );
  timedStart = performance.now();
  recorder.start(timedStart * 1e6);
  rewrites.startsAt(timedStart);
  let queryResult: Promise<QueryLoadResult> | undefined;
  const queryLoad =
    options.queryConnections === undefined
      ? undefined
      : startQueryLoad({
          conductorUrl: options.conductorUrl,
          connections: options.queryConnections,
          token: config.httpToken,
          pairIds: workload.pairIds,
          sample: () => {
            const sentSoFar = Math.max(0, completed - 1);
            const body = bodies[Math.floor(Math.random() * (sentSoFar + 1))];
            if (body === undefined) return undefined;
            const command = JSON.parse(body.toString()) as CommandEnvelope;
            // The workloads' commands all name an order (place, cancel or amend).
            const orderId = "id" in command.payload ? command.payload.id : "";
            return { commandId: command.commandId, orderId };
          },
        });
  const progressTimer = setInterval(() => {
    const elapsed = (performance.now() - timedStart) / 1000;
    options.progress(
      `${boundary}: ${completedTimed}/${options.commands} complete, ${Math.round(completedTimed / Math.max(elapsed, 0.001))} cmd/s, ${elapsed.toFixed(1)} s`,
    );
  }, 1000);
  try {
    if (options.rate === undefined) {
      for (let i = timedFrom; i < bodies.length; i++) await publish(i);
    } else {
      const intervalMs = 1000 / options.rate;
      for (let i = timedFrom; i < bodies.length; ) {
        const due = timedStart + (i - timedFrom) * intervalMs;
        const now = performance.now();
        if (now < due) {
          await sleepUntil(due);
          continue;
        }
        // Latency counts from the scheduled time, not the actual send: no coordinated omission.
        while (
          i < bodies.length &&
          timedStart + (i - timedFrom) * intervalMs <= performance.now()
        ) {
          await publish(i, timedStart + (i - timedFrom) * intervalMs);
          i++;
        }
      }
    }
    await publisher.waitForConfirms();
    await waitFor(
      "every command's durable result",
      () => completedTimed >= options.commands,
      600_000,
    );
    if (wantEvents) {
      await waitFor(
        "the events stream drained",
        async () => (await valkey.xlen(keys.events)) === 0,
        120_000,
      );
    }
  } finally {
    clearInterval(progressTimer);
    // Stopped however the run ended: its loops would otherwise outlive it.
    queryResult = queryLoad?.stop();
  }
  const seconds = (performance.now() - timedStart) / 1000;
  const queries = await queryResult;
  stopObserving();
  await rewritesForced;
  const rewriteCounts = await rewrites.close();
  const cpuUsed = cpu.close();
  await sampler.stop();

  const conductor = await conductorCounted(bodies.length);
  const outbox = options.outboxUrl ? await fetchMetrics(options.outboxUrl) : {};
  const delta = (now: Record<string, unknown>, base: Record<string, unknown>, key: string) =>
    metricNumber(now, key) - metricNumber(base, key);
  const processed = delta(conductor, baseConductor, "matching_commands_processed_total");
  const failures = delta(conductor, baseConductor, "matching_command_failures_total");
  const eventsCreated = delta(conductor, baseConductor, "matching_events_created_total");
  const durabilityTimeouts = delta(conductor, baseConductor, "matching_durability_timeouts_total");
  const collections = {
    conductor: delta(conductor, baseConductor, gcMetricName),
    ...(options.outboxUrl === undefined ? {} : { outbox: delta(outbox, baseOutbox, gcMetricName) }),
    bench: benchCollections,
  };
  const uncrossed = [
    ...rewriteCounts
      .filter((c) => !(c.rewrites >= 1))
      .map((c) => `no AOF rewrite on the ${c.server}`),
    ...Object.entries(collections)
      .filter(([, count]) => !(count >= 1))
      .map(([process]) => `no garbage collection seen in the ${process}`),
  ];
  const eventsReceivedTimed = eventsReceived - eventsReceivedBefore;

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
  check("commandsProcessed", processed, processed === options.commands);
  check("commandFailures", failures, failures === 0);
  check("durabilityTimeouts", durabilityTimeouts, durabilityTimeouts === 0);
  // The reference engine applied every command as it was made (see encode).
  check("rejectedResults", failedReplies, failedReplies === referenceRejected);
  invariants.rejectedExpected = referenceRejected;
  if (config.durability === "aof-replicated") {
    // No successful sample proves nothing: that fails too.
    const connected = sampler.replicaSamples > 0 && sampler.minReplicas >= 1;
    check("replicaConnectedThroughout", connected, connected);
    invariants.replicaSamples = sampler.replicaSamples;
  }
  check("eventsCreated", eventsCreated, eventsCreated === referenceEventsTimed);
  invariants.eventsExpected = referenceEventsTimed;
  if (wantEvents) {
    const retries = delta(outbox, baseOutbox, "matching_outbox_publish_retries_total");
    const deadLetters = delta(outbox, baseOutbox, "matching_outbox_dead_letter_total");
    check("outboxRetries", retries, retries === 0);
    check("outboxDeadLetters", deadLetters, deadLetters === 0);
    // The outbox waits for its reads to be durable too; a timed-out wait publishes nothing and
    // counts no retry, so only this counter shows a stall on missing replica acknowledgements.
    const outboxTimeouts = delta(outbox, baseOutbox, "matching_outbox_durability_timeouts_total");
    check("outboxDurabilityTimeouts", outboxTimeouts, outboxTimeouts === 0);
    check("eventsReceivedBySinks", eventsReceivedTimed, eventsReceivedTimed === eventsCreated);
    // A copy republished after a failed stream acknowledgement counts no retry and may reach
    // the sink after these counts are read: the outbox's confirmed publishes show it.
    const published = delta(outbox, baseOutbox, "matching_outbox_events_published_total");
    check("eventsPublished", published, published === eventsCreated);
    check("duplicateEventsReceived", duplicateEvents, duplicateEvents === 0);
    const xlen = await valkey.xlen(keys.events);
    check("streamLengthAtEnd", xlen, xlen === 0);
  }
  if (options.workload === "alternating") {
    let depth = 0;
    for (const pairId of workload.pairIds) {
      depth += await valkey.zcard(keys.bookRates(pairId, "bid"));
      depth += await valkey.zcard(keys.bookRates(pairId, "ask"));
    }
    check("remainingBookDepth", depth, depth === 0);
  }
  const trace = await tracedCommands(options.conductorUrl, config.httpToken, (commandId) => {
    const i = indexOf.get(commandId);
    if (i === undefined || i < timedFrom || !isComplete(i)) return undefined;
    const end = useReplies ? repliedAt[i]! : lastEventAt[i]!;
    return { sentMs: performance.timeOrigin + sentAt[i]!, endMs: performance.timeOrigin + end };
  });
  const digest = (await fetch(`${options.conductorUrl}/digest`).then(
    (r) => r.json(),
    () => ({}),
  )) as {
    digest?: string;
    restingOrders?: number;
  };
  // The conductor's books must be exactly what the domain made of the same commands.
  const expectedDigest = reference.digest();
  check("finalBookDigest", digest.digest ?? "unavailable", digest.digest === expectedDigest);
  invariants.expectedBookDigest = expectedDigest;
  invariants.restingOrdersAtEnd = digest.restingOrders ?? -1;

  const timeline = sampler.timeline(recorder.series().timeline, timedStart);
  const book = await describeBook(options.conductorUrl, workload.pairIds);
  const stageKeys = Object.keys(conductor).filter((k) => k.startsWith("matching_stage_"));
  const stages: Record<string, unknown> = {};
  for (const key of stageKeys) stages[key] = conductor[key];
  stages.matching_batch_size = conductor.matching_batch_size;
  if (options.outboxUrl)
    stages.matching_outbox_confirm_latency_seconds = outbox.matching_outbox_confirm_latency_seconds;

  for (const consumer of consumers) await consumer.close().catch(() => undefined);
  await connection.close().catch(() => undefined);
  valkey.disconnect();
  return {
    commands: options.commands,
    seconds,
    latency,
    publishLatency,
    timeline,
    spans: rewrites.spans(),
    invariants,
    checks,
    stages,
    ...(queries === undefined ? {} : { queries }),
    facts: {
      workloadDescription: workload.description,
      commandMix: [...mix]
        .map(([kind, count]) => `${kind} ${((100 * count) / options.commands).toFixed(1)}%`)
        .join(", "),
      bookAtEnd: book,
      fillCounts: wantEvents
        ? fillDistribution(fills.subarray(timedFrom))
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
    },
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

function commandKind(command: CommandEnvelope): string {
  if (command.type !== "order.place") return command.type.replace(/^order\./, "");
  const p = command.payload;
  const flags = [
    p.postOnly ? "post-only" : "",
    p.timeInForce && p.timeInForce !== "gtc" ? p.timeInForce : "",
  ];
  return [p.type, p.side, ...flags].filter(Boolean).join(" ");
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
