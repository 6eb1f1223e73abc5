/**
 * `matchd bench failover`: the full pipeline at a fixed offered rate on the HA stack, the
 * datastore primary SIGKILLed at set moments (each after the last failover recovered and the
 * old primary rejoined as a replica), and what a client and a consumer saw across each kill.
 */
import { z } from "zod";
import type { Config } from "../config/schema";
import { type CommandEnvelope, MatchingEngine } from "../domain/index";
import { connectBroker } from "../infra/amqp/connect";
import { FramePublisher } from "../infra/amqp/fast-publish";
import { allEventExchanges, commandExchange, commandQueue } from "../infra/amqp/topology";
import { createValkey, parseInfo } from "../infra/valkey/client";
import { listedReplicas } from "../infra/valkey/fsync-policy";
import { partitionKeys } from "../infra/valkey/keys";
import {
  currentPrimary,
  killValkeyNode,
  restartValkeyNode,
  type StackInfo,
  waitForFailover,
} from "../stack/index";
import { LeanConsumer } from "./lean-consumer";
import { createWorkload, type WorkloadName, workloadNames } from "./workloads";

const int = (min: number) => z.coerce.number().int().min(min);

/** The failover bench's own flags, checked in one place (benchProblems lists their problems). */
export const failoverFlags = z.object({
  "--fault": z.enum(["datastore-primary"]).default("datastore-primary"),
  "--faults": int(1).max(100).default(5),
  "--rate": int(1).max(20_000).default(1000),
  "--fault-interval": int(4).max(600).default(10),
  "--workload": z.enum(workloadNames as [WorkloadName, ...WorkloadName[]]).default("alternating"),
  "--seed": int(0).default(1),
});
export type FailoverFlags = z.infer<typeof failoverFlags>;

/** Flags of other boundaries that failover would ignore. */
const foreignFlags = ["--commands", "--duration", "--warmup", "--events", "--connections"];

export function failoverProblems(flags: ReadonlyMap<string, string>): string[] {
  const problems = foreignFlags
    .filter((flag) => flags.has(flag))
    .map((flag) => `${flag} does not apply to failover (its length follows --faults)`);
  if (flags.get("--fault")?.startsWith("broker") === true)
    problems.push("--fault broker-node is not built yet: the broker runs on one node");
  const parsed = failoverFlags.safeParse(Object.fromEntries(failoverKeys(flags)));
  if (!parsed.success)
    for (const issue of parsed.error.issues)
      problems.push(`${String(issue.path[0])}: ${issue.message}`);
  return problems;
}

function failoverKeys(flags: ReadonlyMap<string, string>): [string, string][] {
  const known = Object.keys(failoverFlags.shape);
  return [...flags].filter(([flag]) => known.includes(flag));
}

export function parseFailoverFlags(flags: ReadonlyMap<string, string>): FailoverFlags {
  return failoverFlags.parse(Object.fromEntries(failoverKeys(flags)));
}

/** What one kill did, as the clients saw it. */
export interface FaultRecord {
  killed: string;
  promoted: string;
  /** From the kill, milliseconds (performance.now() based, relative to the run's start). */
  atMs: number;
  promotedAfterMs: number;
  /** Until the first durable reply to a command scheduled after the kill. */
  ackedAgainMs: number | undefined;
  /** Until the first event of a command scheduled after the kill. */
  eventsAgainMs: number | undefined;
  /** Until the restarted node was an online replica again. */
  rejoinedAfterMs: number | undefined;
}

/** Everything the run observed, judged by failover-report.ts. */
export interface FailoverObservation {
  flags: FailoverFlags;
  sent: CommandEnvelope[];
  /** Scheduled send time of each command, ms from the run's start. */
  scheduledMs: Float64Array;
  /** Reply time of each command, ms from the run's start (0: none). */
  repliedMs: Float64Array;
  replyBodies: (string | undefined)[];
  /** Time of each command's first event, ms from the run's start (0: none). */
  firstEventMs: Float64Array;
  /** Payload hash of every distinct event id seen. */
  eventHashes: Map<string, bigint>;
  eventCopies: number;
  phantomEvents: number;
  unexpectedEvents: number;
  faults: FaultRecord[];
  stored: (string | null)[];
  finalDigest: { digest?: string; restingOrders?: number };
  expected: { digest: string; restingOrders: number };
  conductorMetrics: Record<string, unknown>;
  outboxMetrics: Record<string, unknown>;
  minReplicas: number;
  seconds: number;
}

export interface FailoverRun {
  info: StackInfo;
  config: Config;
  conductorUrl: string;
  outboxUrl: string;
  flags: FailoverFlags;
  progress: (line: string) => void;
}

/** Warm-up before the first kill and quiet time after the last. */
const leadMs = 5000;
const tailMs = 4000;

export async function observeFailovers(run: FailoverRun): Promise<FailoverObservation> {
  const { flags, info, progress } = run;
  const partition = run.config.partition;
  const workload = createWorkload(flags["--workload"], { seed: flags["--seed"], partition });
  const durationMs = leadMs + flags["--faults"] * flags["--fault-interval"] * 1000 + tailMs;
  const total = Math.ceil((flags["--rate"] * durationMs) / 1000);
  const sent = [
    ...workload.prefill(),
    ...Array.from({ length: total }, (_, i) => workload.next(i)),
  ];
  const bodies = sent.map((command) => Buffer.from(JSON.stringify(command)));
  const indexOf = new Map(sent.map((command, i) => [command.commandId, i]));
  const scheduledMs = new Float64Array(sent.length);
  const repliedMs = new Float64Array(sent.length);
  const firstEventMs = new Float64Array(sent.length);
  const replyBodies: (string | undefined)[] = new Array(sent.length);
  const eventHashes = new Map<string, bigint>();
  let eventCopies = 0;
  let phantomEvents = 0;
  let unexpectedEvents = 0;
  const start = performance.now();
  const now = () => performance.now() - start;

  const replies = await LeanConsumer.open({
    url: info.brokerUrl,
    name: "matchd-bench-failover-replies",
    exchanges: [],
    onDelivery: (message) => {
      const i = indexOf.get(message.correlationId ?? "");
      if (i === undefined || repliedMs[i]! > 0) return;
      repliedMs[i] = now();
      replyBodies[i] = message.body.toString();
    },
  });
  const sink = await LeanConsumer.open({
    url: info.brokerUrl,
    name: "matchd-bench-failover-sink",
    exchanges: allEventExchanges,
    onDelivery: (message) => {
      const eventId = message.messageId ?? "";
      const i = indexOf.get(eventId.slice(0, eventId.indexOf(":")));
      if (i === undefined) {
        unexpectedEvents++;
        return;
      }
      const hash = BigInt(Bun.hash(message.body));
      const before = eventHashes.get(eventId);
      if (before === undefined) eventHashes.set(eventId, hash);
      else {
        eventCopies++;
        if (before !== hash) phantomEvents++;
      }
      if (firstEventMs[i] === 0) firstEventMs[i] = now();
    },
  });
  const connection = await connectBroker(info.brokerUrl, "matchd-bench-failover");
  const channel = await connection.createConfirmChannel();
  const frames = new FramePublisher(channel);
  const queue = commandQueue(partition);
  const publish = (i: number) => {
    frames.publish(commandExchange, queue, bodies[i]!, false, {
      persistent: true,
      contentType: "application/json",
      replyTo: replies.queue,
      correlationId: sent[i]!.commandId,
      messageId: sent[i]!.commandId,
      timestamp: Date.now(),
    });
  };

  const prefilled = sent.length - total;
  for (let i = 0; i < prefilled; i++) {
    scheduledMs[i] = now();
    publish(i);
  }
  const openLoop = (async () => {
    const t0 = now();
    for (let k = 0; k < total; k++) {
      const i = prefilled + k;
      scheduledMs[i] = t0 + (k * 1000) / flags["--rate"];
      const wait = scheduledMs[i]! - now();
      if (wait > 1) await Bun.sleep(wait);
      publish(i);
    }
  })();

  const faults: FaultRecord[] = [];
  let minReplicas = Number.POSITIVE_INFINITY;
  for (let f = 0; f < flags["--faults"]; f++) {
    const at = leadMs + f * flags["--fault-interval"] * 1000;
    if (at > now()) await Bun.sleep(at - now());
    const victim = await currentPrimary(info);
    const atMs = now();
    await killValkeyNode(info, victim.name);
    progress(`fault ${f + 1}: killed primary ${victim.name} at ${(atMs / 1000).toFixed(1)} s`);
    const promoted = await waitForFailover(info, { from: victim.name, timeoutMs: 30_000 });
    const promotedAfterMs = now() - atMs;
    await restartValkeyNode(info, victim.name);
    const rejoined = await waitForOnlineReplicas(promoted.port, 2, 30_000);
    minReplicas = Math.min(minReplicas, rejoined.seen);
    faults.push({
      killed: victim.name,
      promoted: promoted.name,
      atMs,
      promotedAfterMs,
      ackedAgainMs: undefined,
      eventsAgainMs: undefined,
      rejoinedAfterMs: rejoined.ok ? now() - atMs : undefined,
    });
    progress(
      `fault ${f + 1}: ${promoted.name} promoted after ${promotedAfterMs.toFixed(0)} ms; ${victim.name} ${rejoined.ok ? "rejoined as a replica" : "did not rejoin"}`,
    );
  }
  await openLoop;
  progress("waiting for every reply and event");
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline) {
    if (repliedMs.every((t) => t > 0) && firstEventMs.every((t) => t > 0)) break;
    await Bun.sleep(100);
  }
  await Bun.sleep(1000); // late duplicates, if any, are counted too
  const seconds = now() / 1000;
  for (const fault of faults) {
    fault.ackedAgainMs = firstAfter(scheduledMs, repliedMs, fault.atMs);
    fault.eventsAgainMs = firstAfter(scheduledMs, firstEventMs, fault.atMs);
  }

  const valkey = createValkey(info.datastoreUrl, { name: "matchd-bench-failover-check" });
  const keys = partitionKeys(partition);
  const stored: (string | null)[] = [];
  for (let i = 0; i < sent.length; i += 1000) {
    const chunk = sent.slice(i, i + 1000).map((c) => keys.processedCommand(c.commandId));
    stored.push(...(await valkey.mget(chunk)));
  }
  valkey.disconnect();
  const reference = new MatchingEngine();
  for (const command of sent) reference.apply(command);
  const finalDigest = (await fetch(`${run.conductorUrl}/digest`).then((r) => r.json())) as {
    digest?: string;
    restingOrders?: number;
  };
  const [conductorMetrics = {}, outboxMetrics = {}] = await Promise.all(
    [run.conductorUrl, run.outboxUrl].map(
      async (url) => (await (await fetch(`${url}/metrics`)).json()) as Record<string, unknown>,
    ),
  );
  await Promise.all([replies.close(), sink.close(), connection.close().catch(() => undefined)]);
  return {
    flags,
    sent,
    scheduledMs,
    repliedMs,
    replyBodies,
    firstEventMs,
    eventHashes,
    eventCopies,
    phantomEvents,
    unexpectedEvents,
    faults,
    stored,
    finalDigest,
    expected: { digest: reference.digest(), restingOrders: reference.restingOrderCount() },
    conductorMetrics,
    outboxMetrics,
    minReplicas: Number.isFinite(minReplicas) ? minReplicas : -1,
    seconds,
  };
}

/** Milliseconds from `atMs` to the earliest `done` of a command scheduled after it. */
function firstAfter(scheduled: Float64Array, done: Float64Array, atMs: number): number | undefined {
  let first = Number.POSITIVE_INFINITY;
  for (let i = 0; i < scheduled.length; i++) {
    if (scheduled[i]! >= atMs && done[i]! > 0 && done[i]! < first) first = done[i]!;
  }
  return Number.isFinite(first) ? first - atMs : undefined;
}

/** Waits until the primary at `port` lists `count` online replicas. */
async function waitForOnlineReplicas(
  port: number,
  count: number,
  timeoutMs: number,
): Promise<{ ok: boolean; seen: number }> {
  const primary = createValkey(`redis://127.0.0.1:${port}`, {
    name: "matchd-bench-failover-watch",
  });
  primary.on("error", () => undefined);
  const deadline = performance.now() + timeoutMs;
  let seen = 0;
  try {
    while (performance.now() < deadline) {
      const listed = listedReplicas(parseInfo(await primary.info("replication")));
      seen = listed.filter((r) => r.state === "online").length;
      if (seen >= count) return { ok: true, seen };
      await Bun.sleep(100);
    }
    return { ok: false, seen };
  } finally {
    primary.disconnect();
  }
}
