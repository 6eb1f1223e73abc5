/**
 * The sink of the event benches: one exclusive queue bound to every event exchange, consumed
 * without acknowledgements so that the consumer is never the bottleneck being measured. It
 * counts the events of one run (their ids start with the run id), each once, and notes
 * duplicates and messages of other runs.
 */
import type { ChannelModel } from "amqplib";
import { allEventExchanges } from "../infra/amqp/topology";
import { SeenEvents } from "./event-dedup";

export class EventSink {
  /** Distinct events of this run received. */
  received = 0;
  duplicates = 0;
  /** Messages of other runs or partitions: the contract's exchanges are shared. */
  foreign = 0;
  /** performance.now() of the first and the latest event of this run (0 before any). */
  firstReceivedAt = 0;
  lastReceivedAt = 0;
  private readonly seen: SeenEvents;
  private readonly prefix: string;
  private readonly commands: number;

  /**
   * `runId`: every event id of the run has the form `<runId>-<command>:<ordinal>:<type>`, with
   * command numbers below `commands`.
   */
  private constructor(runId: string, commands: number) {
    this.prefix = `${runId}-`;
    this.commands = commands;
    this.seen = new SeenEvents(commands);
  }

  static async open(connection: ChannelModel, runId: string, commands: number): Promise<EventSink> {
    const sink = new EventSink(runId, commands);
    const channel = await connection.createChannel();
    const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
    for (const exchange of allEventExchanges) {
      await channel.assertExchange(exchange, "direct", { durable: true });
      await channel.bindQueue(queue, exchange, exchange);
    }
    await channel.consume(
      queue,
      (message) => {
        if (message) sink.record(String(message.properties.messageId));
      },
      { noAck: true },
    );
    return sink;
  }

  private record(eventId: string): void {
    if (!eventId.startsWith(this.prefix)) {
      this.foreign++;
      return;
    }
    const command = Number(eventId.slice(this.prefix.length, eventId.indexOf(":")));
    // Outside the run's command range the id still counts once, through the set of other ids.
    const known =
      Number.isInteger(command) && command >= 0 && command < this.commands ? command : undefined;
    if (!this.seen.isNew(eventId, known)) {
      this.duplicates++;
      return;
    }
    this.received++;
    const now = performance.now();
    if (this.firstReceivedAt === 0) this.firstReceivedAt = now;
    this.lastReceivedAt = now;
  }
}
