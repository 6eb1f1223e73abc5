/**
 * The sink of the event benches: one exclusive queue bound to every event exchange, consumed
 * without acknowledgements by the lean bench consumer so that the sink is never the bottleneck
 * being measured and takes as little as it can of the CPU the measured system shares. It
 * counts the events of one run (their ids start with the run id), each once, and notes
 * duplicates and messages of other runs.
 */
import { allEventExchanges } from "../src/infra/amqp/topology";
import { SeenEvents } from "./event-dedup";
import { LeanConsumer } from "./lean-consumer";

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
  private consumer: LeanConsumer | undefined;
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

  /**
   * `deferred`: the queue is bound but not consumed until startReceiving(), so it collects the
   * run's events meanwhile and queued() counts them.
   */
  static async open(
    brokerUrl: string,
    runId: string,
    commands: number,
    { deferred = false }: { deferred?: boolean } = {},
  ): Promise<EventSink> {
    const sink = new EventSink(runId, commands);
    sink.consumer = await LeanConsumer.open({
      url: brokerUrl,
      name: "matchd-bench-sink",
      exchanges: allEventExchanges,
      onDelivery: (delivery) => sink.record(delivery.messageId ?? ""),
      deferConsume: deferred,
    });
    return sink;
  }

  /** Starts receiving (a deferred sink; a no-op otherwise). */
  async startReceiving(): Promise<void> {
    await this.consumer?.consume();
  }

  /** Messages waiting in the sink's queue (any run's). */
  async queued(): Promise<number> {
    return (await this.consumer?.messageCount()) ?? 0;
  }

  /** Throws when the sink stopped receiving before it was closed, so a run never waits it out. */
  throwIfFailed(): void {
    const failed = this.consumer?.failed;
    if (failed) throw new Error(`the bench's event sink failed: ${failed.message}`);
  }

  /** Closes the sink's connection; its queue goes with it. */
  async close(): Promise<void> {
    await this.consumer?.close();
  }

  private record(eventId: string): void {
    if (!eventId.startsWith(this.prefix)) {
      this.foreign++;
      return;
    }
    const colon = eventId.indexOf(":");
    const command = Number(eventId.slice(this.prefix.length, colon));
    // Outside the run's command range the id still counts once, through the set of other ids.
    const known =
      Number.isInteger(command) && command >= 0 && command < this.commands ? command : undefined;
    if (!this.seen.isNew(eventId, known, colon)) {
      this.duplicates++;
      return;
    }
    this.received++;
    const now = performance.now();
    if (this.firstReceivedAt === 0) this.firstReceivedAt = now;
    this.lastReceivedAt = now;
  }
}
