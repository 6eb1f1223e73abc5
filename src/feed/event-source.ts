/**
 * The feed's events from RabbitMQ: a private queue (exclusive, deleted with its connection)
 * bound to every event exchange, read without acknowledgements. Nothing is lost by that: a
 * feed that loses its queue starts again from a new snapshot. Only the partition's events
 * are passed on, with their `x-partition-sequence` header.
 */

import type { Channel, ChannelModel, ConsumeMessage } from "amqplib";
import { connectBroker } from "../infra/amqp/connect";
import { allEventExchanges, declareEventExchanges } from "../infra/amqp/topology";
import { withinMs } from "../infra/within";
import type { FeedEvent } from "./feed-book";

export interface EventSourceOptions {
  brokerUrl: string;
  partition: number;
  name: string;
  onEvent: (event: FeedEvent, seq: string | undefined) => void;
  /** The queue or its connection is gone: events may have been missed. */
  onLost: (why: string) => void;
}

function decode(message: ConsumeMessage, partition: number): FeedEvent | undefined {
  let envelope: unknown;
  try {
    envelope = JSON.parse(message.content.toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof envelope !== "object" || envelope === null) return undefined;
  const e = envelope as Record<string, unknown>;
  if (e.partition !== partition || typeof e.type !== "string" || typeof e.pairId !== "number") {
    return undefined;
  }
  const payload = typeof e.payload === "object" && e.payload !== null ? e.payload : {};
  return {
    type: e.type,
    pairId: e.pairId,
    commandId: String(e.commandId),
    payload: payload as Record<string, unknown>,
    commandLast: String(message.properties.headers?.["x-command-last"]) === "1",
  };
}

export class EventSource {
  private connection: ChannelModel | undefined;
  private closing = false;

  constructor(private readonly options: EventSourceOptions) {}

  /** Connects, declares and binds the queue, and starts consuming. */
  async open(): Promise<void> {
    const { brokerUrl, name, partition, onEvent } = this.options;
    const connection = await connectBroker(brokerUrl, name);
    this.connection = connection;
    connection.on("error", () => undefined);
    connection.on("close", () => {
      this.connection = undefined;
      this.lost("the broker connection closed");
    });
    const channel: Channel = await connection.createChannel();
    channel.on("error", () => undefined);
    channel.on("close", () => this.lost("the broker channel closed"));
    await declareEventExchanges(channel);
    // Classic: a quorum queue cannot be exclusive, and a vhost may default to quorum.
    const { queue } = await channel.assertQueue("", {
      exclusive: true,
      durable: false,
      autoDelete: true,
      arguments: { "x-queue-type": "classic" },
    });
    for (const exchange of allEventExchanges) await channel.bindQueue(queue, exchange, exchange);
    await channel.consume(
      queue,
      (message) => {
        if (message === null) return this.lost("the broker cancelled the feed's consumer");
        const event = decode(message, partition);
        const seq = message.properties.headers?.["x-partition-sequence"] as unknown;
        if (event !== undefined) onEvent(event, seq === undefined ? undefined : String(seq));
      },
      { noAck: true },
    );
  }

  /** Closes the connection; bounded, as a node that stopped answering never says close-ok. */
  async close(): Promise<void> {
    this.closing = true;
    const connection = this.connection;
    this.connection = undefined;
    if (connection !== undefined)
      await withinMs(
        connection.close().catch(() => undefined),
        2000,
      );
  }

  private lost(why: string): void {
    if (this.closing) return;
    this.closing = true;
    this.options.onLost(why);
  }
}
