/**
 * The conductor's RabbitMQ side: consumes the partition's command queue with bounded
 * prefetch, hands deliveries over in arrival order, acknowledges or requeues whole
 * batches, sends RPC replies and dead-letters unreadable bodies. Reconnects with backoff.
 */

import type { Channel, ChannelModel, ConfirmChannel, ConsumeMessage, Options } from "amqplib";
import type { Config } from "../config/schema";
import { brokerErrorLine } from "../infra/amqp/broker-errors";
import { connectBroker } from "../infra/amqp/connect";
import { FramePublisher } from "../infra/amqp/fast-publish";
import {
  commandDeadLetterQueue,
  commandQueue,
  declareCommandTopology,
} from "../infra/amqp/topology";
import { backoffDelayMs } from "../infra/backoff";
import type { Logger } from "../infra/log";
import { withinMs } from "../infra/within";
import { epochMs } from "./trace";

export interface Delivery {
  message: ConsumeMessage;
  /** Which channel delivered it: a delivery tag is only valid on its own channel. */
  generation: number;
  receivedAtMs: number;
}

/** Broker reconnect pacing: 100 ms doubling, jittered, at most 5 s apart. */
const reconnectBackoff = { baseMs: 100, capMs: 5000 };

/** The AMQP header of a conductor's nudge (see CommandConsumer.nudge): no command, no result. */
export const NUDGE_HEADER = "x-matchd-nudge";

/** How long closing waits for each of the broker's close-ok replies. */
const closeTimeoutMs = 2000;

/**
 * How long the broker may take to confirm dead-lettered messages before the batch fails (and is
 * requeued): a broker under a resource alarm stops reading from publishing connections, and
 * the batch loop must not wait on it for ever.
 */
const deadLetterConfirmTimeoutMs = 10_000;

export class CommandConsumer {
  /** Whether the vhost was checked for the producers' declaration (done on the first connect). */
  private redeclareChecked = false;
  private connection: ChannelModel | undefined;
  /**
   * Replies and dead letters go out on a connection of their own: under a memory or disk
   * alarm the broker stops reading from every connection that publishes, and on a shared
   * connection one reply would hold back the acknowledgements too, stopping the partition
   * while its queue (often the alarm's cause) still holds commands to drain.
   */
  private outputConnection: ChannelModel | undefined;
  private channel: Channel | undefined;
  private output: ConfirmChannel | undefined;
  /** Publishes RPC replies on `output` as pre-encoded frames. */
  private replies: FramePublisher | undefined;
  private generation = 0;

  private pending: Delivery[] = [];
  private stopping = false;
  /** Failed connection attempts in a row; the reconnect backoff grows with it. */
  private reconnectAttempts = 0;
  connected = false;

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    /** Called whenever new deliveries arrive, so the batch loop can wake. */
    private readonly onDelivery: () => void,
  ) {}

  get queue(): string {
    return commandQueue(this.config.partition);
  }

  get pendingCount(): number {
    return this.pending.length;
  }

  async start(): Promise<void> {
    // Handlers of an older connection must never tear down a newer one.
    const generation = ++this.generation;
    const connection = await connectBroker(
      this.config.brokerUrl,
      `matchd-conductor-p${this.config.partition}`,
    );
    this.connection = connection;
    connection.on("error", (error: Error) => this.log.warn("broker connection error", { error }));
    connection.on("close", () => this.lost("connection closed", generation));
    const outputConnection = await connectBroker(
      this.config.brokerUrl,
      `matchd-conductor-p${this.config.partition}-output`,
    );
    this.outputConnection = outputConnection;
    outputConnection.on("error", (error: Error) =>
      this.log.warn("broker output connection error", { error }),
    );
    outputConnection.on("close", () => this.lost("output connection closed", generation));
    outputConnection.on("blocked", (reason: string) =>
      this.log.warn("the broker blocks replies and dead letters (a resource alarm)", { reason }),
    );
    outputConnection.on("unblocked", () =>
      this.log.info("the broker accepts replies and dead letters again"),
    );
    // A reconnect that was under way when close() began must not leave a consumer behind.
    const abandoned = async (): Promise<boolean> => {
      if (!this.stopping) return false;
      await this.closeConnections();
      return true;
    };
    // The vhost check's warning is due once, not at every reconnect (each requeue is one).
    await declareCommandTopology(connection, this.config.partition, this.log, {
      checkProducerRedeclare: !this.redeclareChecked,
    });
    this.redeclareChecked = true;
    const channel = await connection.createChannel();
    channel.on("error", (error: Error) => this.log.warn("command channel error", { error }));
    channel.on("close", () => this.lost("command channel closed", generation));
    await channel.prefetch(this.config.prefetch);
    const output = await outputConnection.createConfirmChannel();
    output.on("error", (error: Error) => this.log.warn("output channel error", { error }));
    // Replies and dead letters need this channel: losing it reconnects like the command channel.
    output.on("close", () => this.lost("output channel closed", generation));
    this.channel = channel;
    this.output = output;
    this.replies = new FramePublisher(output);
    await channel.consume(
      this.queue,
      (message) => {
        if (message === null) {
          this.lost("consumer cancelled by the broker", generation);
          return;
        }
        this.pending.push({ message, generation, receivedAtMs: epochMs() });
        this.onDelivery();
      },
      { noAck: false },
    );
    if (await abandoned()) return;
    this.connected = true;
    this.reconnectAttempts = 0;
    this.log.info("consuming commands", { queue: this.queue, prefetch: this.config.prefetch });
  }

  /** The current channel's generation: deliveries of an older one are never taken. */
  get channelGeneration(): number {
    return this.generation;
  }

  /** Takes up to `max` of the oldest deliveries that are still valid on the current channel. */
  take(max: number): Delivery[] {
    // Stale deliveries only exist right after a reconnect; don't copy the list every batch.
    if (this.pending[0] !== undefined && this.pending[0].generation !== this.generation) {
      this.pending = this.pending.filter((d) => d.generation === this.generation);
    }
    return this.pending.splice(0, max);
  }

  /** Returns deliveries taken but not processed to the front of the pending list. */
  putBack(batch: Delivery[]): void {
    this.pending.unshift(...batch);
  }

  /** Acknowledges a contiguous batch of deliveries with one frame. */
  ack(batch: readonly Delivery[]): boolean {
    const last = batch[batch.length - 1];
    if (!last || last.generation !== this.generation || !this.channel) return false;
    try {
      this.channel.ack(last.message, true);
    } catch (error) {
      // amqplib throws on a channel that is closing: the batch is redelivered, and the
      // redelivery finds its stored results.
      this.log.warn("acknowledgement on a closing channel", { error });
      return false;
    }
    return true;
  }

  /**
   * Returns a failed batch and every later delivery to the queue, so the broker redelivers
   * them in their original order rather than after newer commands. It closes the connection
   * (the broker requeues everything unacknowledged on it, in order) and reconnects: a nack
   * would reach only the deliveries that have arrived, and one already on the wire would
   * arrive after it, be taken ahead of the requeued commands and be matched before them (a
   * test saw 10..19 taken before 0..9). Deliveries of the closed channel are never taken.
   */
  requeueFrom(batch: readonly Delivery[]): void {
    // A batch of a connection already gone was requeued, with everything after it, when that
    // connection closed; the deliveries of the current one come after it: nothing to do.
    const generation = batch[0]?.generation ?? this.generation;
    if (generation !== this.generation) return;
    this.pending = [];
    this.lost("a failed batch is requeued", generation, "info");
  }

  /**
   * Sends a result to the message's `replyTo` with its AMQP `correlationId`, or, when it has
   * none, the envelope's (`envelopeCorrelationId`): a client may set either.
   */
  reply(message: ConsumeMessage, body: string, envelopeCorrelationId?: string): void {
    const { replyTo } = message.properties;
    const correlationId =
      (message.properties.correlationId as string | undefined) || envelopeCorrelationId;
    if (!replyTo || !this.replies) return;
    try {
      this.replies.publish("", replyTo, body, false, {
        correlationId,
        contentType: "application/json",
      });
    } catch (error) {
      // A closing channel: the client can still read its result at GET /commands/:commandId.
      this.log.warn("reply on a closing channel", { error, correlationId });
    }
  }

  /**
   * Puts an empty message with the NUDGE_HEADER on the partition's own queue: whichever
   * conductor is its active consumer takes it as a batch of no command, so a conductor that
   * has had no delivery since it started claims the partition and ticks (see clock.ts).
   * Best effort: unconfirmed, and sent again later if still due.
   */
  nudge(): void {
    try {
      this.output?.sendToQueue(this.queue, Buffer.alloc(0), {
        persistent: false,
        headers: { [NUDGE_HEADER]: 1 },
      });
    } catch (error) {
      this.log.warn("nudge on a closing channel", { error });
    }
  }

  /** Publishes an unreadable message to the dead-letter queue and waits for the broker's confirm. */
  async deadLetter(
    messages: readonly { message: ConsumeMessage; reason: string }[],
  ): Promise<void> {
    const output = this.output;
    const channel = this.channel;
    if (!output || !channel) throw new Error("broker not connected");
    const delivered = async (): Promise<true> => {
      // Declared again first (it is rare, and idempotent): a dead-letter queue deleted while
      // the conductor runs would leave the message unroutable, and an unroutable publish is
      // still confirmed, so the message would be acknowledged and lost. Declared on the
      // command channel, whose connection never publishes, so an alarm never blocks it.
      await channel.assertQueue(commandDeadLetterQueue, { durable: true });
      for (const { message, reason } of messages) {
        output.sendToQueue(
          commandDeadLetterQueue,
          message.content,
          deadLetterProperties(message, reason),
        );
      }
      await output.waitForConfirms();
      return true;
    };
    if ((await withinMs(delivered(), deadLetterConfirmTimeoutMs)) === undefined) {
      throw new Error(
        `dead letters not confirmed within ${deadLetterConfirmTimeoutMs} ms (is the broker blocking publishers?)`,
      );
    }
  }

  async close(): Promise<void> {
    this.stopping = true;
    this.connected = false;
    await this.closeConnections();
  }

  /**
   * Closes both links (a stop, a lost link, a requeue, a failed or abandoned start), each
   * channel before its connection. A channel's close frame queues behind the frames already on
   * that channel (a batch's acknowledgement, its replies); the connection's close frame
   * travels apart and, while the socket is full, overtakes them, and the broker discards
   * whatever follows it. Nor is a publish the broker has read safe until it is confirmed: on
   * a three-node cluster, replies published 160 ms before their channel closed never reached
   * their quorum queue. So the output channel first waits for the confirms of its replies.
   * Each step is bounded: a broker that stopped answering must not hold anything up.
   */
  private closeConnections(): Promise<unknown> {
    const output = this.output;
    return Promise.all([
      closeLink(this.channel, this.connection),
      closeLink(output, this.outputConnection, () => output?.waitForConfirms()),
    ]);
  }

  private lost(reason: string, generation: number, level: "info" | "warn" = "warn"): void {
    if (!this.connected || generation !== this.generation) return;
    this.connected = false;
    this.generation++;
    this.pending = [];
    if (this.stopping) return;
    if (level === "warn") this.log.warn("broker link lost; reconnecting", { reason });
    else this.log.info("reconnecting to the broker", { reason });
    void this.closeConnections();
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    const delay = backoffDelayMs(this.reconnectAttempts++, reconnectBackoff);
    setTimeout(() => {
      if (this.stopping) return;
      this.start().catch((error: Error) => {
        void this.closeConnections();
        this.log.warn("broker reconnect failed", { error: brokerErrorLine(error) });
        this.scheduleReconnect();
      });
    }, delay);
  }

  /**
   * The first connection: retried with backoff until it works or we are stopped (a refusal of
   * the credentials or the vhost ended the boot before, see runConductor).
   */
  async startWithRetry(): Promise<void> {
    for (;;) {
      try {
        await this.start();
        return;
      } catch (error) {
        await this.closeConnections();
        if (this.stopping) return;
        this.log.warn("broker not reachable; retrying", { error: brokerErrorLine(error) });
        await Bun.sleep(backoffDelayMs(this.reconnectAttempts++, reconnectBackoff));
      }
    }
  }
}

/**
 * Closes a channel, once `settle` (if given) resolved, then its connection, waiting at most
 * closeTimeoutMs for each of the broker's answers. A connection the broker blocks (a resource
 * alarm stops it reading from publishing connections) is left to close once the alarm clears:
 * its socket still holds replies of acknowledged commands, which no redelivery would send again.
 */
async function closeLink(
  channel: Channel | undefined,
  connection: ChannelModel | undefined,
  settle?: () => Promise<unknown> | undefined,
): Promise<void> {
  if (channel && settle) await withinMs(quietly(settle), closeTimeoutMs);
  if (channel)
    await withinMs(
      quietly(() => channel.close()),
      closeTimeoutMs,
    );
  if (connection)
    await withinMs(
      quietly(() => connection.close()),
      closeTimeoutMs,
    );
}

/** A step that may throw at once (amqplib on a closed channel) or reject: either is done. */
async function quietly(step: () => Promise<unknown> | undefined): Promise<void> {
  try {
    await step();
  } catch {
    // Already closed, or closing: nothing more to wait for.
  }
}

/**
 * A dead letter keeps what its producer set, so that it can be replayed as it came: the reply
 * queue, the type, the timestamp. The broker checks `user-id` against the publishing
 * connection's user, so the producer's is kept in a header instead.
 */
function deadLetterProperties(message: ConsumeMessage, reason: string): Options.Publish {
  const p = message.properties;
  return {
    persistent: true,
    headers: {
      ...p.headers,
      "x-dead-letter-reason": reason,
      ...(p.userId === undefined ? {} : { "x-original-user-id": p.userId }),
    },
    contentType: p.contentType,
    contentEncoding: p.contentEncoding,
    messageId: p.messageId,
    correlationId: p.correlationId,
    replyTo: p.replyTo,
    timestamp: p.timestamp,
    type: p.type,
    appId: p.appId,
  };
}
