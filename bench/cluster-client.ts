/**
 * The failover bench's side of the broker, built to outlive a broker node: commands are
 * published with confirms and published again after a reconnect until confirmed; replies and
 * events arrive through quorum queues of the run's own (replicated, so a node's loss drops
 * nothing unread), consumed with acknowledgements, and the consumers come back on another node.
 */
import type { ChannelModel, ConfirmChannel, ConsumeMessage, Options } from "amqplib";
import { connectBroker } from "../src/infra/amqp/connect";
import { withinMs } from "../src/infra/within";

export interface ClusterMessage {
  messageId: string | undefined;
  correlationId: string | undefined;
  /** An event's stream offset (`x-partition-offset`): the order the conductor committed it in. */
  offset: string | undefined;
  /** An event's contiguous per-partition number (`x-partition-sequence`). */
  sequence: string | undefined;
  body: Buffer;
}

export interface ClusterClientOptions {
  urls: string;
  /** Names the run's queues (`matchd-bench-<runId>-replies`, `-events`). */
  runId: string;
  eventExchanges: readonly string[];
  onReply(message: ClusterMessage): void;
  onEvent(message: ClusterMessage): void;
  progress(line: string): void;
}

interface Unconfirmed {
  exchange: string;
  routingKey: string;
  body: Buffer;
  options: Options.Publish;
  /** performance.now() of its last send. */
  sentAt: number;
}

/**
 * A channel with publishes outstanding and no confirm (or nack) for this long is stuck on a
 * dead queue leader (seen: nothing for a minute after the leader's node died): the
 * connection is dropped and everything unconfirmed goes out again on a new one. It is the
 * silence that counts, not the oldest publish's age: after a reconnect resends a backlog
 * that takes longer than this to confirm, judging by age dropped every new connection too.
 */
const stuckAfterMs = 5000;

const quorum = { durable: true, arguments: { "x-queue-type": "quorum" } };

/** Drops the connection's socket without a close handshake. */
function destroySocket(connection: ChannelModel): void {
  const inner = connection as unknown as { connection?: { stream?: { destroy(): void } } };
  inner.connection?.stream?.destroy();
}

export class ClusterClient {
  private connection: ChannelModel | undefined;
  private publisher: ConfirmChannel | undefined;
  /** Publishes not confirmed yet, by a sequence of ours: sent again after a reconnect. */
  private readonly unconfirmed = new Map<number, Unconfirmed>();
  private sequence = 0;
  /** performance.now() of the current channel's last confirm or nack, or of its opening. */
  private lastConfirmAt = 0;
  private closing = false;
  private connecting: Promise<void> | undefined;
  reconnects = 0;
  readonly replyQueue: string;
  readonly eventQueue: string;

  private constructor(private readonly options: ClusterClientOptions) {
    this.replyQueue = `matchd-bench-${options.runId}-replies`;
    this.eventQueue = `matchd-bench-${options.runId}-events`;
  }

  static async open(options: ClusterClientOptions): Promise<ClusterClient> {
    const client = new ClusterClient(options);
    await client.connect();
    client.watchdog = setInterval(() => client.recycleIfStuck(), 1000);
    return client;
  }

  private watchdog: ReturnType<typeof setInterval> | undefined;

  private recycleIfStuck(): void {
    const connection = this.connection;
    if (connection === undefined) return;
    const now = performance.now();
    if (now - this.lastConfirmAt < stuckAfterMs) return;
    for (const item of this.unconfirmed.values()) {
      if (now - item.sentAt < stuckAfterMs) continue;
      this.options.progress(`broker: no confirm for ${stuckAfterMs} ms; reconnecting`);
      destroySocket(connection);
      this.lost(connection);
      return;
    }
  }

  /** Publishes now if connected, else on the next connection; again until confirmed. */
  publish(exchange: string, routingKey: string, body: Buffer, options: Options.Publish): void {
    const id = this.sequence++;
    const item = { exchange, routingKey, body, options, sentAt: performance.now() };
    this.unconfirmed.set(id, item);
    this.send(id, item);
  }

  get pending(): number {
    return this.unconfirmed.size;
  }

  private send(id: number, item: Unconfirmed): void {
    const channel = this.publisher;
    if (channel === undefined) return;
    item.sentAt = performance.now();
    try {
      channel.publish(item.exchange, item.routingKey, item.body, item.options, (error) => {
        if (this.publisher === channel) this.lastConfirmAt = performance.now();
        if (error === null || error === undefined) this.unconfirmed.delete(id);
        // A quorum queue electing a new leader nacks what it cannot take: sent again shortly
        // (a dead channel's failures are sent again by the reconnect instead).
        else if (this.publisher === channel) setTimeout(() => this.resend(id, channel), 100);
      });
    } catch {
      // The channel is closing: the reconnect sends it again.
    }
  }

  private resend(id: number, channel: ConfirmChannel): void {
    const item = this.unconfirmed.get(id);
    if (item !== undefined && this.publisher === channel) this.send(id, item);
  }

  private connect(): Promise<void> {
    this.connecting ??= this.connectLoop().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connectLoop(): Promise<void> {
    for (let attempt = 0; !this.closing; attempt++) {
      try {
        await this.openChannels();
        return;
      } catch (error) {
        if (attempt % 10 === 0)
          this.options.progress(`broker: reconnecting (${(error as Error).message})`);
        await Bun.sleep(200);
      }
    }
  }

  /**
   * Bounded: right after a node's death a declaration can wait on a queue whose leader is
   * being elected again; the attempt is abandoned and made afresh.
   */
  private async openChannels(): Promise<void> {
    const connection = await connectBroker(this.options.urls, "matchd-bench-failover");
    connection.on("error", () => undefined);
    const opened = await withinMs(
      this.openOn(connection).then(() => true),
      5000,
    );
    if (opened === undefined) {
      // Its close handshake may hang as well: the socket goes, and the next attempt begins.
      destroySocket(connection);
      throw new Error("declarations unanswered for 5 s");
    }
  }

  private async openOn(connection: ChannelModel): Promise<void> {
    connection.on("close", () => this.lost(connection));
    const setup = await connection.createChannel();
    await setup.assertQueue(this.replyQueue, quorum);
    await setup.assertQueue(this.eventQueue, quorum);
    for (const exchange of this.options.eventExchanges) {
      await setup.assertExchange(exchange, "direct", { durable: true });
      await setup.bindQueue(this.eventQueue, exchange, exchange);
    }
    await setup.close();
    const consumer = await connection.createChannel();
    await consumer.prefetch(2000);
    const deliver = (handler: (m: ClusterMessage) => void) => (message: ConsumeMessage | null) => {
      if (message === null) return;
      handler({
        messageId: message.properties.messageId as string | undefined,
        correlationId: message.properties.correlationId as string | undefined,
        offset: message.properties.headers?.["x-partition-offset"] as string | undefined,
        sequence: message.properties.headers?.["x-partition-sequence"] as string | undefined,
        body: message.content,
      });
      consumer.ack(message);
    };
    await consumer.consume(this.replyQueue, deliver(this.options.onReply));
    await consumer.consume(this.eventQueue, deliver(this.options.onEvent));
    const publisher = await connection.createConfirmChannel();
    this.connection = connection;
    this.publisher = publisher;
    this.lastConfirmAt = performance.now();
    // Everything a dead connection left unconfirmed, in the order it was first published.
    for (const [id, item] of this.unconfirmed) this.send(id, item);
  }

  private lost(connection: ChannelModel): void {
    if (this.connection !== connection || this.closing) return;
    this.connection = undefined;
    this.publisher = undefined;
    this.reconnects++;
    this.options.progress("broker: connection lost; moving to another node");
    void this.connect();
  }

  /** Deletes the run's queues and closes. */
  async close(): Promise<void> {
    await this.connecting;
    this.closing = true;
    clearInterval(this.watchdog);
    const connection = this.connection;
    if (connection === undefined) return;
    try {
      const channel = await connection.createChannel();
      await channel.deleteQueue(this.replyQueue);
      await channel.deleteQueue(this.eventQueue);
    } catch {
      // A node gone at the very end: its queues stay behind in a private stack.
    }
    await connection.close().catch(() => undefined);
  }
}
