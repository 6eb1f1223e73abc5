/**
 * Shared pieces of the conductor integration tests: a conductor child process with its
 * own HTTP port, a confirming command publisher, a raw Valkey client for a partition's
 * keys, and polling helpers. Every server is real; nothing here fakes one.
 */
import { afterAll, afterEach, beforeAll, expect } from "bun:test";
import amqp, { type ChannelModel, type ConfirmChannel, type Options } from "amqplib";
import { createWorkload } from "../../bench/workloads";
import { CommitBuilder, commitScript } from "../../src/conductor/commit-script";
import { ConductorStore } from "../../src/conductor/store";
import { decodeStoredResult } from "../../src/conductor/stored-result";
import { resolveConfig } from "../../src/config/resolve";
import type { Config } from "../../src/config/schema";
import { type CommandEnvelope, MatchingEngine, type RestingOrder } from "../../src/domain/index";
import {
  commandExchange,
  commandQueue,
  commandQueueArguments,
} from "../../src/infra/amqp/topology";
import { createValkey, type Valkey } from "../../src/infra/valkey/client";
import { type PartitionKeys, partitionKeys } from "../../src/infra/valkey/keys";
import { freePorts } from "../../src/stack/process";
import { eventually } from "../support/eventually";
import {
  metricsJson,
  spawnMatchd,
  stackStartTimeoutMs,
  type TestStack,
  testStack,
  uniquePartition,
} from "../support/stack";
import { startValkeyPair, type ValkeyPair } from "../support/valkey-pair";

export const partitionCount = 1024;

/** A conductor's config on the suite's stack, for tests that drive its parts in-process. */
export function conductorConfig(stack: TestStack, partition: number, prefetch: number): Config {
  const resolved = resolveConfig(
    {
      MATCHING_PARTITION: String(partition),
      MATCHING_PARTITION_COUNT: String(partitionCount),
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      MATCHING_BROKER_URL: stack.brokerUrl,
      MATCHING_PREFETCH: String(prefetch),
      MATCHING_LOG_LEVEL: "error",
    },
    new Map(),
    "conductor",
  );
  if (!resolved.ok) throw new Error(resolved.problems.join("; "));
  return resolved.config;
}

export { eventually };

export interface ConductorProcess {
  process: Bun.Subprocess<"ignore", "ignore", "pipe">;
  port: number;
  url: string;
  log: () => string;
  metrics(): Promise<Record<string, unknown>>;
  metric(name: string): Promise<number>;
  /** SIGTERM and wait; returns the exit code. */
  stop(): Promise<number>;
  kill9(): Promise<void>;
  /** Kills it unless it already exited (for afterEach / finally). */
  dispose(): Promise<void>;
}

export interface ConductorOptions {
  datastoreUrl?: string;
  extraArgs?: string[];
  env?: Record<string, string>;
  /** Wait for /readyz 200 (default) or only for /healthz. */
  waitReady?: boolean;
}

const running = new Set<ConductorProcess>();

/** Kills every conductor a test left running; call from afterEach/afterAll. */
export async function disposeAll(): Promise<void> {
  for (const conductor of [...running]) await conductor.dispose();
}

export async function startConductor(
  stack: TestStack,
  partition: number,
  {
    datastoreUrl = stack.datastoreUrl,
    extraArgs = [],
    env = {},
    waitReady = true,
  }: ConductorOptions = {},
): Promise<ConductorProcess> {
  const port = (await freePorts(1))[0]!;
  const { child, log: readLog } = spawnMatchd(
    [
      "conductor",
      "--partition",
      String(partition),
      "--partition-count",
      String(partitionCount),
      "--http-port",
      String(port),
      "--datastore-url",
      datastoreUrl,
      "--broker-url",
      stack.brokerUrl,
      ...extraArgs,
    ],
    env,
  );
  const url = `http://127.0.0.1:${port}`;
  const handle: ConductorProcess = {
    process: child,
    port,
    url,
    log: readLog,
    metrics: () => metricsJson(`${url}/metrics`),
    async metric(name) {
      return Number((await handle.metrics())[name] ?? Number.NaN);
    },
    async stop() {
      child.kill("SIGTERM");
      const code = await child.exited;
      running.delete(handle);
      return code;
    },
    async kill9() {
      child.kill("SIGKILL");
      await child.exited;
      running.delete(handle);
    },
    async dispose() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await child.exited;
      running.delete(handle);
    },
  };
  running.add(handle);
  const path = waitReady ? "/readyz" : "/healthz";
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const response = await fetch(`${url}${path}`);
      if (response.status === 200) break;
    } catch {
      // Not listening yet.
    }
    if (child.exitCode !== null) {
      running.delete(handle);
      throw new Error(`conductor exited with ${child.exitCode}:\n${readLog()}`);
    }
    if (Date.now() > deadline) {
      await handle.dispose();
      throw new Error(`conductor did not become ready:\n${readLog()}`);
    }
    await Bun.sleep(50);
  }
  return handle;
}

/** Publishes commands to a partition's queue on a confirm channel, as producers do. */
export class Publisher {
  private constructor(
    private readonly connection: ChannelModel,
    readonly channel: ConfirmChannel,
  ) {}

  static async open(brokerUrl: string): Promise<Publisher> {
    const connection = await amqp.connect(brokerUrl);
    // A test that kills this broker node must not die of an unheard 'error'.
    connection.on("error", () => undefined);
    const channel = await connection.createConfirmChannel();
    await channel.assertExchange(commandExchange, "direct", { durable: true });
    return new Publisher(connection, channel);
  }

  /** Declares the partition's queue as the conductor does, so commands published first are kept. */
  async declare(partition: number): Promise<void> {
    const queue = commandQueue(partition);
    await this.channel.assertQueue(queue, { durable: true, arguments: commandQueueArguments });
    await this.channel.bindQueue(queue, commandExchange, queue);
  }

  /** Publishes raw bodies (strings are sent as they are, objects as JSON) and waits for confirms. */
  async publish(
    partition: number,
    bodies: readonly (string | object)[],
    options: Options.Publish = {},
  ): Promise<void> {
    const queue = commandQueue(partition);
    for (const body of bodies) {
      const content = Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
      this.channel.publish(commandExchange, queue, content, {
        persistent: true,
        contentType: "application/json",
        timestamp: Date.now(),
        ...options,
      });
    }
    await this.channel.waitForConfirms();
  }

  async messageCount(partition: number): Promise<number> {
    return (await this.channel.checkQueue(commandQueue(partition))).messageCount;
  }

  async consumerCount(partition: number): Promise<number> {
    return (await this.channel.checkQueue(commandQueue(partition))).consumerCount;
  }

  async deleteQueue(partition: number): Promise<void> {
    await this.channel.deleteQueue(commandQueue(partition)).catch(() => undefined);
  }

  channelModel(): ChannelModel {
    return this.connection;
  }

  async close(): Promise<void> {
    // Bounded: the node may be gone (a broker failover test), and its close-ok never comes.
    await Promise.race([this.connection.close().catch(() => undefined), Bun.sleep(2000)]);
  }
}

/** A raw client for checking (and breaking) one partition's keys. */
export class PartitionStore {
  readonly keys: PartitionKeys;
  readonly valkey: Valkey;

  constructor(url: string, partition: number) {
    this.keys = partitionKeys(partition);
    // Through matchd's client: a redis+sentinel:// URL reaches the current primary.
    this.valkey = createValkey(url, { name: "matchd-test-partition-store" });
    this.valkey.on("error", () => undefined);
  }

  eventCount(): Promise<number> {
    return this.valkey.xlen(this.keys.events);
  }

  async bookSizes(pairId: number): Promise<{ bids: number; asks: number }> {
    const [bids, asks] = await Promise.all([
      this.valkey.zcard(this.keys.bookRates(pairId, "bid")),
      this.valkey.zcard(this.keys.bookRates(pairId, "ask")),
    ]);
    return { bids, asks };
  }

  /** Stored results by command id, in one MGET per chunk (missing ones are absent). */
  async storedResults(
    commandIds: readonly string[],
  ): Promise<Map<string, Record<string, unknown>>> {
    const out = new Map<string, Record<string, unknown>>();
    for (let start = 0; start < commandIds.length; start += 1000) {
      const ids = commandIds.slice(start, start + 1000);
      const values = await this.valkey.mget(ids.map((id) => this.keys.processedCommand(id)));
      ids.forEach((id, i) => {
        const value = values[i];
        if (value != null) out.set(id, { ...decodeStoredResult(id, value) });
      });
    }
    return out;
  }

  /** Every event envelope in the stream, in stream order. */
  async events(): Promise<{ entryId: string; event: Record<string, unknown> }[]> {
    const entries = await this.valkey.xrange(this.keys.events, "-", "+");
    return entries.map(([entryId, fields]) => ({
      entryId,
      event: JSON.parse(fields[fields.indexOf("event") + 1]!) as Record<string, unknown>,
    }));
  }

  /** Deletes every key of the partition (SCAN + DEL), as benchmark harnesses do. */
  async deleteAll(): Promise<number> {
    let cursor = "0";
    let deleted = 0;
    do {
      const [next, keys] = await this.valkey.scan(
        cursor,
        "MATCH",
        `${this.keys.prefix}*`,
        "COUNT",
        1000,
      );
      cursor = next;
      if (keys.length > 0) deleted += await this.valkey.del(...keys);
    } while (cursor !== "0");
    return deleted;
  }

  close(): void {
    this.valkey.disconnect();
  }
}

/** Events per command id, to check that no command's events were written twice. */
export function eventsByCommand(events: { event: Record<string, unknown> }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const { event } of events) {
    const id = String(event.commandId);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/**
 * Checks the stream against the stored results: every command's events appear exactly
 * as many times as its result says (none written twice), and every eventId is unique.
 * Returns a list of problems (empty when consistent).
 */
export async function streamProblems(
  store: PartitionStore,
  ids: readonly string[],
): Promise<string[]> {
  const problems: string[] = [];
  const events = await store.events();
  const counts = eventsByCommand(events);
  const results = await store.storedResults(ids);
  for (const id of ids) {
    const result = results.get(id);
    if (!result) {
      problems.push(`${id}: no stored result`);
      continue;
    }
    const expected = Number(result.events);
    if ((counts.get(id) ?? 0) !== expected)
      problems.push(`${id}: ${counts.get(id) ?? 0} events, result says ${expected}`);
  }
  const eventIds = new Set(events.map((e) => String(e.event.eventId)));
  if (eventIds.size !== events.length)
    problems.push(`${events.length - eventIds.size} duplicate eventIds`);
  return problems.slice(0, 20);
}

export function commandIds(commands: readonly CommandEnvelope[]): string[] {
  return commands.map((c) => c.commandId);
}

/** The uninterrupted run: the same commands applied once each, in order, by the pure engine. */
export function referenceRun(commands: readonly CommandEnvelope[]) {
  const engine = new MatchingEngine();
  let events = 0;
  const results = new Map<string, { status: string; code: number }>();
  for (const command of commands) {
    const outcome = engine.apply(command);
    events += outcome.events.length;
    results.set(command.commandId, { status: outcome.result.status, code: outcome.result.code });
  }
  return { digest: engine.digest(), resting: engine.restingOrderCount(), events, results };
}

/**
 * The stored results that differ from the reference run's (status or code), at most five,
 * each with what was stored and what was expected.
 */
export async function resultsDiffering(
  store: PartitionStore,
  commands: readonly CommandEnvelope[],
  expected: ReturnType<typeof referenceRun>,
): Promise<string[]> {
  const stored = await store.storedResults(commandIds(commands));
  return commands
    .map((c) => c.commandId)
    .filter((id) => {
      const got = stored.get(id);
      const want = expected.results.get(id)!;
      return got?.status !== want.status || got?.code !== want.code;
    })
    .slice(0, 5)
    .map(
      (id) =>
        `${id}: got ${JSON.stringify(stored.get(id))} want ${JSON.stringify(expected.results.get(id))}`,
    );
}

/**
 * Once a (restarted) conductor has been given every command: waits until each has a stored
 * result and every message it got is settled (redelivered copies of commands a killed
 * conductor committed may still be queued or pending), then returns its /digest.
 */
export async function settledDigest(
  conductor: ConductorProcess,
  store: PartitionStore,
  publisher: Publisher,
  partition: number,
  ids: readonly string[],
): Promise<{ digest: string; restingOrders: number }> {
  await eventually(
    "every command has a stored result",
    async () => (await store.storedResults(ids)).size === ids.length,
    60_000,
    async () => `(${(await store.storedResults(ids)).size} of ${ids.length})`,
  );
  const settled = async () =>
    (await conductor.metric("matching_commands_processed_total")) +
    (await conductor.metric("matching_commands_duplicate_total"));
  let previous = -1;
  await eventually(
    "queue drained",
    async () => {
      const now = await settled();
      const done = now === previous && (await publisher.messageCount(partition)) === 0;
      previous = now;
      if (!done) await Bun.sleep(250);
      return done;
    },
    30_000,
  );
  return (await (await fetch(`${conductor.url}/digest`)).json()) as {
    digest: string;
    restingOrders: number;
  };
}

/**
 * The hooks most conductor test files share: the test stack and one command publisher
 * for the file, and every conductor a test started disposed after it. Read the fields
 * inside tests (they are set in beforeAll).
 */
export function conductorSuite(): { readonly stack: TestStack; readonly publisher: Publisher } {
  const suite = {} as { stack: TestStack; publisher: Publisher };
  beforeAll(async () => {
    suite.stack = await testStack();
    suite.publisher = await Publisher.open(suite.stack.brokerUrl);
  }, stackStartTimeoutMs);
  afterEach(disposeAll);
  afterAll(async () => {
    await suite.publisher.close();
  });
  return suite;
}

/** Every command's events are in the stream exactly once, whole and in order. */
export async function expectEventsOnce(
  store: PartitionStore,
  commands: readonly CommandEnvelope[],
): Promise<void> {
  expect(
    await streamProblems(
      store,
      commands.map((c) => c.commandId),
    ),
  ).toEqual([]);
}

/** Deletes a test partition's keys and command queue and closes its store. */
export async function removePartition(
  store: PartitionStore,
  publisher: Publisher,
  partition: number,
): Promise<void> {
  // A test that failed midway may have left conductors running: gone first, or they would
  // recreate the queue and keys being removed.
  await disposeAll();
  await store.deleteAll();
  // The epoch counter outlives deleteAll (as it outlives any harness's reset); a test's
  // partition is gone for good, so its counter goes too.
  await store.valkey.del(store.keys.ownerEpochCounter);
  store.close();
  await publisher.deleteQueue(partition);
}

/** An exclusive reply queue and the replies it received, by correlation id. */
export async function openReplies(connection: ChannelModel): Promise<{
  queue: string;
  replies: Map<string, Record<string, unknown>>;
  close(): Promise<void>;
}> {
  const channel = await connection.createChannel();
  const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
  const replies = new Map<string, Record<string, unknown>>();
  await channel.consume(
    queue,
    (message) => {
      if (message)
        replies.set(
          String(message.properties.correlationId),
          JSON.parse(message.content.toString()),
        );
    },
    { noAck: true },
  );
  return { queue, replies, close: () => channel.close().catch(() => undefined) };
}

/**
 * After an outage: every command of an alternating run was replied "accepted", counted once
 * (2 events each), its events are in the stream once, the book is empty, and the conductor
 * stops cleanly with the queue empty. Returns its last metrics.
 */
export async function expectAlternatingCompletedOnce(
  conductor: ConductorProcess,
  store: PartitionStore,
  publisher: Publisher,
  partition: number,
  commands: readonly CommandEnvelope[],
  replies: Map<string, Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  await eventually("every command replied", () => replies.size === commands.length, 30_000);
  for (const command of commands) {
    expect(replies.get(command.commandId)).toMatchObject({
      commandId: command.commandId,
      status: "accepted",
    });
  }
  await eventually(
    "counters settle",
    async () => (await conductor.metric("matching_commands_processed_total")) >= commands.length,
  );
  const after = await conductor.metrics();
  // Each command reached its final outcome once; the stream holds its events once.
  expect(after.matching_commands_processed_total).toBe(commands.length);
  expect(after.matching_events_created_total).toBe(2 * commands.length);
  expect(await store.eventCount()).toBe(2 * commands.length);
  await expectEventsOnce(store, commands);
  expect(await store.bookSizes(partition)).toEqual({ bids: 0, asks: 0 });
  expect(await conductor.stop()).toBe(0);
  expect(await publisher.messageCount(partition)).toBe(0);
  return after;
}

/**
 * `count` alternating commands of `partition` (seeded) and a sender for a range of them, each
 * published as an RPC whose reply goes to `replyQueue` under the command's id.
 */
export function alternatingRpcCommands(
  publisher: Publisher,
  partition: number,
  seed: number,
  count: number,
  replyQueue: string,
): { commands: CommandEnvelope[]; publish(from: number, to: number): Promise<unknown> } {
  const workload = createWorkload("alternating", { seed, partition, partitionCount });
  const commands = Array.from({ length: count }, (_, i) => workload.next(i));
  const publish = (from: number, to: number) =>
    Promise.all(
      commands
        .slice(from, to)
        .map((c) =>
          publisher.publish(partition, [c], { replyTo: replyQueue, correlationId: c.commandId }),
        ),
    );
  return { commands, publish };
}

/**
 * Writes `total` resting orders of one pair straight into Valkey in the conductor's own
 * encoding (through the commit script), for a conductor to load at boot.
 */
export async function writeRestingBook(
  store: PartitionStore,
  pairId: number,
  total: number,
): Promise<void> {
  const writer = new ConductorStore(store.valkey, store.keys);
  await store.valkey.set(store.keys.ownerEpoch, "1");
  const commits = Number((await store.valkey.get(store.keys.commitCount)) ?? 0);
  for (let start = 0; start < total; start += 2000) {
    const batch = new CommitBuilder(store.keys.ownerEpoch, 1, store.keys.eventSequence, {
      key: store.keys.commitCount,
      builtOn: commits + start / 2000,
    });
    for (let i = start; i < Math.min(total, start + 2000); i++)
      writer.stageRestingOrder(batch, restingOrder(pairId, i));
    writer.stagePair(batch, pairId);
    await store.valkey.eval(commitScript, batch.keys.length, ...batch.keys, ...batch.args);
  }
}

/** Order i: bids on 50.00..99.99 and asks on 100.01..149.99, 10 orders per level, never crossed. */
function restingOrder(pairId: number, i: number): RestingOrder {
  const side = i % 2 === 0 ? "bid" : "ask";
  const level = Math.floor(i / 2) % 4999;
  const cents = side === "bid" ? 9999 - level : 10_001 + level;
  return {
    id: `load-${i}`,
    userId: `u${i % 1000}`,
    pairId,
    side,
    price: (cents / 100).toFixed(2),
    volume: "1.5",
    volumeTotal: "2",
    timestamp: 1_704_067_200_000 + i,
    sequence: i + 1,
    priceDecimals: 2,
    amountDecimals: 8,
    quoteDecimals: 8,
    stp: "none",
  };
}

/**
 * A private Valkey primary + replica (so pausing its replica touches no other test), a
 * command publisher and an RPC reply queue on the test broker, for one partition's test.
 */
export interface PrivatePairRig {
  stack: TestStack;
  pair: ValkeyPair;
  partition: number;
  publisher: Publisher;
  replyQueue: string;
  replies: Map<string, Record<string, unknown>>;
  /** SIGSTOP / SIGCONT of the replica; close() resumes one left paused. */
  pauseReplica(): void;
  resumeReplica(): void;
  /** Resumes the replica, closes the broker side, deletes the queue, stops both servers. */
  close(): Promise<void>;
}

export async function openPrivatePairRig(prefix: string): Promise<PrivatePairRig> {
  const stack = await testStack();
  const pair = await startValkeyPair(prefix);
  const partition = uniquePartition();
  const publisher = await Publisher.open(stack.brokerUrl);
  const rpc = await amqp.connect(stack.brokerUrl);
  const { queue, replies, close } = await openReplies(rpc);
  let paused = false;
  const rig: PrivatePairRig = {
    stack,
    pair,
    partition,
    publisher,
    replyQueue: queue,
    replies,
    pauseReplica() {
      process.kill(pair.replica.pid, "SIGSTOP");
      paused = true;
    },
    resumeReplica() {
      process.kill(pair.replica.pid, "SIGCONT");
      paused = false;
    },
    async close() {
      if (paused) rig.resumeReplica();
      await disposeAll();
      await close();
      await rpc.close().catch(() => undefined);
      await publisher.deleteQueue(partition);
      await publisher.close();
      for (const server of [pair.primary, pair.replica]) await server.stop().catch(() => undefined);
    },
  };
  return rig;
}
