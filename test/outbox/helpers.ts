/**
 * Shared pieces of the outbox integration tests: realistic event envelopes written
 * straight into a partition's stream, an inbox that consumes every event exchange and
 * dedups by messageId (Jepsen's total-queue check), and an outbox child process with
 * its own HTTP port for /metrics polling.
 */
import amqp, { type Channel, type ChannelModel, type ConsumeMessage } from "amqplib";
import type Redis from "ioredis";
import { eventTypes } from "../../src/domain/events";
import type { EventType } from "../../src/domain/index";
import { allEventExchanges } from "../../src/infra/amqp/topology";
import { partitionKeys } from "../../src/infra/valkey/keys";
import { freePorts } from "../../src/stack/process";
import { metricsJson, spawnMatchd, type TestStack } from "../support/stack";

/** A contract envelope for event number `n` of a partition; eventId is deterministic in n. */
export function envelope(partition: number, n: number, type: EventType = eventTypes[n % 4]!) {
  return {
    schemaVersion: 1,
    eventId: `p${partition}-c${Math.floor(n / 2)}-${n % 2}-${type}`,
    type,
    partition,
    pairId: partition,
    commandId: `p${partition}-c${Math.floor(n / 2)}`,
    correlationId: `corr-${n}`,
    ordinal: n % 2,
    occurredAt: new Date(1_700_000_000_000 + n).toISOString(),
    payload: {
      seq: n,
      id: `order-${n}`,
      userId: 7,
      side: n % 2 ? "ask" : "bid",
      price: "100",
      volume: "1",
    },
  };
}

/** Appends events `from..to-1` to the partition's stream with one pipeline; returns their ids. */
export async function writeEvents(
  valkey: Redis,
  partition: number,
  from: number,
  to: number,
  type?: EventType,
): Promise<string[]> {
  const stream = partitionKeys(partition).events;
  const pipeline = valkey.pipeline();
  for (let n = from; n < to; n++)
    pipeline.xadd(stream, "*", "event", JSON.stringify(envelope(partition, n, type)));
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([error, id]) => {
    if (error) throw error;
    return String(id);
  });
}

/** Appends events `from..to-1` in one transaction, as a commit does: a blocked read gets all. */
export async function commitEvents(
  valkey: Redis,
  partition: number,
  from: number,
  to: number,
): Promise<void> {
  const stream = partitionKeys(partition).events;
  const transaction = valkey.multi();
  for (let n = from; n < to; n++)
    transaction.xadd(stream, "*", "event", JSON.stringify(envelope(partition, n)));
  await transaction.exec();
}

export async function deletePartitionKeys(valkey: Redis, partition: number): Promise<void> {
  const keys = await valkey.keys(`${partitionKeys(partition).prefix}*`);
  if (keys.length > 0) await valkey.del(...keys);
}

export interface Received {
  messageId: string;
  seq: number;
  offset: string;
  type: string;
  /** The AMQP delivery mode: 2 when published persistent, as the contract says. */
  deliveryMode: number;
  /** Published with `x-command-last`: the last event of its command's commit. */
  commandLast: boolean;
}

/**
 * Consumes every event exchange through one exclusive auto-delete queue and keeps the
 * events of one partition: all deliveries in arrival order, and an inbox by messageId.
 */
export class Inbox {
  readonly deliveries: Received[] = [];
  readonly byId = new Map<string, Received>();
  private constructor(
    private readonly connection: ChannelModel,
    private readonly channel: Channel,
    readonly queue: string,
  ) {}

  static async open(
    brokerUrl: string,
    partition: number,
    exchanges = allEventExchanges,
  ): Promise<Inbox> {
    const connection = await amqp.connect(brokerUrl);
    const channel = await connection.createChannel();
    const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
    const inbox = new Inbox(connection, channel, queue);
    for (const exchange of exchanges) {
      await channel.assertExchange(exchange, "direct", { durable: true });
      await channel.bindQueue(queue, exchange, exchange);
    }
    await channel.consume(queue, (message) => inbox.receive(message, partition), { noAck: true });
    return inbox;
  }

  /** Binds this inbox to one more exchange (used to end an unroutable episode). */
  async bind(exchange: string): Promise<void> {
    await this.channel.assertExchange(exchange, "direct", { durable: true });
    await this.channel.bindQueue(this.queue, exchange, exchange);
  }

  private receive(message: ConsumeMessage | null, partition: number): void {
    if (!message) return;
    const body = JSON.parse(message.content.toString()) as {
      partition: number;
      payload: { seq: number };
    };
    // Other tests (and services) share the contract's exchanges: keep only our partition.
    if (body.partition !== partition) return;
    const received: Received = {
      messageId: String(message.properties.messageId),
      seq: body.payload.seq,
      offset: String(message.properties.headers?.["x-partition-offset"]),
      type: String(message.properties.type),
      deliveryMode: Number(message.properties.deliveryMode),
      commandLast: message.properties.headers?.["x-command-last"] === "1",
    };
    this.deliveries.push(received);
    if (!this.byId.has(received.messageId)) this.byId.set(received.messageId, received);
  }

  get duplicates(): number {
    return this.deliveries.length - this.byId.size;
  }

  /**
   * Checks per-partition order of an at-least-once stream: after removing redeliveries
   * of already-seen ids, first deliveries come in increasing sequence.
   */
  firstDeliveryOrderKept(): boolean {
    const seen = new Set<string>();
    let last = -1;
    for (const d of this.deliveries) {
      if (seen.has(d.messageId)) continue;
      seen.add(d.messageId);
      if (d.seq < last) return false;
      last = d.seq;
    }
    return true;
  }

  async waitFor(count: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.byId.size < count) {
      if (Date.now() > deadline)
        throw new Error(`inbox has ${this.byId.size} of ${count} events after ${timeoutMs} ms`);
      await Bun.sleep(20);
    }
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }
}

/**
 * Whether a mandatory publish to `exchange` is routed right now: the broker returns it
 * when no queue is bound. Lets a test check its precondition on a shared broker.
 */
export async function isRoutable(brokerUrl: string, exchange: string): Promise<boolean> {
  const connection = await amqp.connect(brokerUrl);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertExchange(exchange, "direct", { durable: true });
    let returned = false;
    channel.on("return", () => {
      returned = true;
    });
    channel.publish(exchange, exchange, Buffer.from("{}"), {
      mandatory: true,
      messageId: "routability-probe",
    });
    await channel.waitForConfirms();
    return !returned;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

export interface OutboxProcess {
  process: Bun.Subprocess<"ignore", "ignore", "pipe">;
  port: number;
  metricsUrl: string;
  stderr: () => string;
  metrics(): Promise<Record<string, unknown>>;
  /** SIGTERM and wait for a graceful exit; returns the exit code. */
  stop(): Promise<number>;
  kill9(): Promise<void>;
}

export async function startOutbox(
  stack: TestStack,
  partition: number,
  extraArgs: string[] = [],
  env: Record<string, string> = {},
  /**
   * Wait until the boot's durability check passed (HTTP answers before it): tests that pause
   * the replica right after the start would otherwise stall the check, not the delivery.
   */
  { waitPolicy = true }: { waitPolicy?: boolean } = {},
): Promise<OutboxProcess> {
  const port = (await freePorts(1))[0]!;
  const { child, log } = spawnMatchd(
    ["outbox", "--partition", String(partition), "--http-port", String(port), ...extraArgs],
    {
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      MATCHING_BROKER_URL: stack.brokerUrl,
      MATCHING_PARTITION_COUNT: "1024",
      ...env,
    },
  );
  const metricsUrl = `http://127.0.0.1:${port}/metrics`;
  const handle: OutboxProcess = {
    process: child,
    port,
    metricsUrl,
    stderr: log,
    metrics: () => metricsJson(metricsUrl),
    async stop() {
      child.kill("SIGTERM");
      return child.exited;
    },
    async kill9() {
      child.kill("SIGKILL");
      await child.exited;
    },
  };
  const listening = async (): Promise<boolean> => {
    try {
      return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
    } catch {
      return false; // Not listening yet.
    }
  };
  const checked = () =>
    !waitPolicy || log().includes("durability policy verified") || log().includes("CAN BE LOST");
  const deadline = Date.now() + 20_000;
  while (!(await listening()) || !checked()) {
    if (child.exitCode !== null || child.signalCode !== null) {
      // A kill point may end it before a poll saw it listen: it ran as the test asked.
      if (child.signalCode === "SIGKILL" && log().includes("kill point")) return handle;
      throw new Error(`outbox exited with ${child.exitCode ?? child.signalCode}:\n${log()}`);
    }
    if (Date.now() > deadline) {
      // Never leave a late starter draining a partition under the following tests.
      child.kill("SIGKILL");
      await child.exited;
      throw new Error(`outbox did not start and pass its durability check:\n${log()}`);
    }
    await Bun.sleep(50);
  }
  return handle;
}

export { eventually } from "../support/eventually";

export function metricNumber(metrics: Record<string, unknown>, name: string): number {
  return Number(metrics[name] ?? Number.NaN);
}

/**
 * A TCP proxy in front of a server (broker or datastore), so a test can cut the
 * outbox's connections the way a server restart or network failure would, without
 * touching the shared servers.
 */
export interface TcpProxy {
  url: string;
  /** Drops every proxied connection and refuses new ones for `ms`. */
  outage(ms: number): void;
  close(): Promise<void>;
}

export async function startTcpProxy(serverUrl: string): Promise<TcpProxy> {
  const { createServer: createTcpServer, connect } = await import("node:net");
  const target = new URL(serverUrl);
  const targetPort = Number(target.port || (target.protocol === "amqp:" ? 5672 : 6379));
  const sockets = new Set<import("node:net").Socket>();
  let refuseUntil = 0;
  const server = createTcpServer((client) => {
    if (Date.now() < refuseUntil) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", drop);
    upstream.on("close", drop);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const url = new URL(serverUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    outage(ms: number) {
      refuseUntil = Date.now() + ms;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
