/**
 * The `feed` boundary: the full pipeline with `matchd feed` on top, at an offered rate, with
 * N WebSocket subscribers keeping books. Beside them, in the same run, a plain RabbitMQ
 * consumer of the same events: the feed's own cost is the difference of the two latencies,
 * each from the command's scheduled send (to the delta's arrival; to the command's last event).
 */

import type { Socket } from "node:net";
import amqp, { type Channel, type ChannelModel, type ConfirmChannel } from "amqplib";
import type { CommandEnvelope } from "../src/domain/index";
import {
  allEventExchanges,
  commandExchange,
  commandQueue,
  declareCommandTopology,
} from "../src/infra/amqp/topology";
import { createLogger } from "../src/infra/log";
import { BenchFeedClient, openStalledSubscriber } from "./feed-clients";
import { LatencyHistogram } from "./histogram";
import { sleepUntil } from "./pace";
import { createWorkload, type Workload } from "./workloads";

export interface FeedBenchOptions {
  brokerUrl: string;
  partition: number;
  partitionCount: number;
  feedUrl: string;
  conductorUrl: string;
  workload: string;
  seed: number;
  rate: number;
  durationS: number;
  subscribers: number;
  /** Subscribers that stop reading, opened before the timed commands. */
  stalled: number;
  progress: (line: string) => void;
}

/** What the plain consumer saw: which command each seq belongs to, and when each command's last event came. */
class EventTimes {
  readonly commandOfSeq = new Map<number, string>();
  readonly lastArrival = new Map<string, number>();
  maxSeq = 0;
  private channel: Channel | undefined;

  async open(connection: ChannelModel, partition: number): Promise<void> {
    const channel = await connection.createChannel();
    this.channel = channel;
    const { queue } = await channel.assertQueue("", {
      exclusive: true,
      arguments: { "x-queue-type": "classic" },
    });
    for (const exchange of allEventExchanges) {
      await channel.assertExchange(exchange, "direct", { durable: true });
      await channel.bindQueue(queue, exchange, exchange);
    }
    await channel.consume(
      queue,
      (message) => {
        if (message === null) return;
        const at = performance.now();
        const seq = Number(message.properties.headers?.["x-partition-sequence"]);
        const envelope = JSON.parse(message.content.toString()) as {
          commandId: string;
          partition: number;
        };
        if (envelope.partition !== partition) return;
        this.commandOfSeq.set(seq, envelope.commandId);
        this.lastArrival.set(envelope.commandId, at);
        if (seq > this.maxSeq) this.maxSeq = seq;
      },
      { noAck: true },
    );
  }

  async close(): Promise<void> {
    await this.channel?.close().catch(() => undefined);
  }
}

interface Sent {
  commandIds: string[];
  sentAt: Map<string, number>;
  seconds: number;
}

async function publishAll(
  channel: ConfirmChannel,
  partition: number,
  commands: CommandEnvelope[],
): Promise<void> {
  for (const command of commands) {
    channel.publish(
      commandExchange,
      commandQueue(partition),
      Buffer.from(JSON.stringify(command)),
      {
        persistent: true,
        contentType: "application/json",
      },
    );
  }
  await channel.waitForConfirms();
}

/** The timed commands, each at its scheduled time; latency counts from that time. */
async function publishTimed(
  channel: ConfirmChannel,
  options: FeedBenchOptions,
  workload: Workload,
): Promise<Sent> {
  const count = options.rate * options.durationS;
  const intervalMs = 1000 / options.rate;
  const sent: Sent = { commandIds: [], sentAt: new Map(), seconds: 0 };
  const startedAt = performance.now();
  for (let i = 0; i < count; i++) {
    const due = startedAt + i * intervalMs;
    if (performance.now() < due) await sleepUntil(due);
    const command = workload.next(i);
    sent.commandIds.push(command.commandId);
    sent.sentAt.set(command.commandId, due);
    channel.publish(
      commandExchange,
      commandQueue(options.partition),
      Buffer.from(JSON.stringify(command)),
      {
        persistent: true,
        contentType: "application/json",
      },
    );
  }
  await channel.waitForConfirms();
  sent.seconds = (performance.now() - startedAt) / 1000;
  return sent;
}

export interface FeedBenchResult {
  sent: Sent;
  feedLatency: LatencyHistogram;
  consumerLatency: LatencyHistogram;
  clients: BenchFeedClient[];
  updatesReceived: number;
  workload: Workload;
}

/** Opens the consumer and the subscribers, sends the prefill and the timed commands, waits for every update. */
export async function runFeedBench(
  options: FeedBenchOptions,
  caughtUp: (clients: BenchFeedClient[], maxSeq: number) => Promise<void>,
): Promise<FeedBenchResult> {
  const workload = createWorkload(options.workload, {
    seed: options.seed,
    partition: options.partition,
    partitionCount: options.partitionCount,
  });
  const connection = await amqp.connect(options.brokerUrl.split(",")[0]!);
  connection.on("error", () => undefined);
  try {
    await declareCommandTopology(connection, options.partition, createLogger("error", {}), {
      checkProducerRedeclare: false,
    });
    const times = new EventTimes();
    await times.open(connection, options.partition);
    const channel = await connection.createConfirmChannel();
    await publishAll(channel, options.partition, workload.prefill());
    const ws = `${options.feedUrl.replace(/^http/, "ws")}/ws`;
    const clients: BenchFeedClient[] = [];
    for (let i = 0; i < options.subscribers; i++) {
      clients.push(await BenchFeedClient.open(ws, workload.pairIds[i % workload.pairIds.length]!));
    }
    const stalled: Socket[] = [];
    for (let i = 0; i < options.stalled; i++) {
      stalled.push(await openStalledSubscriber(options.feedUrl, workload.pairIds));
    }
    options.progress(
      `${clients.length} subscribers (and ${stalled.length} that stop reading) on ${workload.pairIds.length} pair(s); offering ${options.rate} commands/s for ${options.durationS} s`,
    );
    const sent = await publishTimed(channel, options, workload);
    await caughtUp(clients, times.maxSeq);
    const result = measure(options, workload, sent, times, clients);
    for (const socket of stalled) socket.destroy();
    await times.close();
    return result;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

function measure(
  _options: FeedBenchOptions,
  workload: Workload,
  sent: Sent,
  times: EventTimes,
  clients: BenchFeedClient[],
): FeedBenchResult {
  const feedLatency = new LatencyHistogram();
  const consumerLatency = new LatencyHistogram();
  let updatesReceived = 0;
  for (const client of clients) {
    const { seq, at } = client.arrivals;
    for (let i = 0; i < seq.length; i++) {
      const sentAt = sent.sentAt.get(times.commandOfSeq.get(seq[i]!) ?? "");
      if (sentAt === undefined) continue;
      feedLatency.record((at[i]! - sentAt) * 1e6);
      updatesReceived++;
    }
  }
  for (const id of sent.commandIds) {
    const last = times.lastArrival.get(id);
    if (last !== undefined) consumerLatency.record((last - sent.sentAt.get(id)!) * 1e6);
  }
  return { sent, feedLatency, consumerLatency, clients, updatesReceived, workload };
}
