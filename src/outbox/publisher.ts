/**
 * One broker connection and ONE confirm channel carrying a partition's events in
 * stream order, as the contract publishes them: persistent, mandatory, messageId =
 * eventId, type = event type, headers x-partition-offset = stream entry id,
 * x-partition-sequence = the entry's contiguous number and, on an event known to be its
 * command's last, x-command-last = "1". Reports
 * each publish's outcome (ack, nack, returned as unroutable, channel closed) and the
 * first channel or connection failure; a failed publisher is closed and replaced.
 */
import type { ChannelModel, ConfirmChannel, Message } from "amqplib";
import { connectBroker } from "../infra/amqp/connect";
import { FramePublisher } from "../infra/amqp/fast-publish";
import type { PublishHeader } from "../infra/amqp/publish-frames";
import { declareEventExchanges } from "../infra/amqp/topology";
import type { Logger } from "../infra/log";
import { withinMs } from "../infra/within";
import type { OutboxEvent } from "./envelope";

/** The headers of an event's message, as the contract gives them. */
function headersOf(event: OutboxEvent): PublishHeader[] {
  const headers: PublishHeader[] = [{ name: "x-partition-offset", value: event.entryId }];
  if (event.sequence !== undefined) {
    headers.push({ name: "x-partition-sequence", value: event.sequence });
  }
  if (event.commandLast) headers.push({ name: "x-command-last", value: "1" });
  return headers;
}

export type ConfirmOutcome = "ack" | "nack" | "returned" | "closed";

/** How long closing waits for each of the broker's close-ok replies. */
const closeTimeoutMs = 2000;

export class EventPublisher {
  private failure: Error | null = null;
  private readonly failureListeners: ((error: Error) => void)[] = [];
  private drainWaiters: (() => void)[] = [];
  /** Entry ids the broker returned as unroutable; their (following) ack becomes "returned". */
  private readonly returned = new Set<string>();
  /** Set by close(): a deliberate close is not logged as a broker failure. */
  private closing = false;
  /** Why the broker blocks this connection's publishing (a resource alarm), or null. */
  blockedReason: string | null = null;
  /** Publishes pre-encoded frames on `channel` (amqplib's publish when it cannot). */
  private readonly frames: FramePublisher;

  private constructor(
    private readonly connection: ChannelModel,
    private readonly channel: ConfirmChannel,
    private readonly log: Logger,
    private readonly onUnroutable: (exchange: string) => void,
  ) {
    connection.on("error", (error: Error) => this.fail(error));
    connection.on("close", () => this.fail(new Error("broker connection closed")));
    // A blocked connection sends nothing and nothing fails: readiness says so (see run.ts).
    connection.on("blocked", (reason: string) => {
      this.blockedReason = reason;
      log.warn("broker blocked publishing", { reason });
    });
    connection.on("unblocked", () => {
      this.blockedReason = null;
      log.info("broker unblocked publishing");
    });
    this.frames = new FramePublisher(channel);
    if (!this.frames.encoding)
      log.debug("amqplib internals not as expected; publishing through amqplib");
    channel.on("error", (error: Error) => this.fail(error));
    channel.on("close", () => this.fail(new Error("confirm channel closed")));
    channel.on("drain", () => this.wakeDrainWaiters());
    channel.on("return", (message: Message) => {
      const offset = message.properties.headers?.["x-partition-offset"];
      if (typeof offset === "string") this.returned.add(offset);
      this.onUnroutable(message.fields.exchange);
    });
  }

  /** Connects, opens the confirm channel and declares the event exchanges. */
  static async open(
    url: string,
    connectionName: string,
    log: Logger,
    onUnroutable: (exchange: string) => void,
  ): Promise<EventPublisher> {
    const connection = await connectBroker(url, connectionName);
    // amqplib emits 'error' whether or not anyone listens, and an unheard 'error' is thrown:
    // a 406 on a declaration or a socket reset while opening would crash the outbox instead
    // of failing this open(), which the caller retries with backoff. The same failure also
    // rejects the pending call, so the events themselves need no handling here.
    const heardWhileOpening = () => undefined;
    connection.on("error", heardWhileOpening);
    try {
      const channel = await connection.createConfirmChannel();
      channel.on("error", heardWhileOpening);
      await declareEventExchanges(channel);
      return new EventPublisher(connection, channel, log, onUnroutable);
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  get failed(): Error | null {
    return this.failure;
  }

  /** Calls `listener` once, on the first failure (at once if it already failed). */
  onFailure(listener: (error: Error) => void): void {
    if (this.failure) listener(this.failure);
    else this.failureListeners.push(listener);
  }

  /**
   * Sends one event; `onConfirm` runs exactly once with its outcome. Returns false
   * when the channel's write buffer is full: wait for `drained()` before sending more.
   */
  publish(event: OutboxEvent, onConfirm: (outcome: ConfirmOutcome) => void): boolean {
    const confirmed = (error: unknown) => {
      if (this.returned.delete(event.entryId)) onConfirm("returned");
      else if (error === null || error === undefined) onConfirm("ack");
      else if (error instanceof Error && error.message === "message nacked") onConfirm("nack");
      else onConfirm("closed");
    };
    return this.frames.publish(
      event.exchange,
      event.exchange,
      event.body,
      true,
      {
        contentType: "application/json",
        headers: headersOf(event),
        persistent: true,
        messageId: event.eventId,
        type: event.type,
      },
      confirmed,
    );
  }

  /** Resolves on the channel's next 'drain', or at once when the publisher has failed. */
  drained(): Promise<void> {
    if (this.failure) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.closing = true;
    this.fail(new Error("publisher closed"));
    // Each close waits for the broker's close-ok, which a broker that blocks this connection
    // (or stopped answering) may never send: bounded, so that a new session can start. A
    // connection whose close was cut short is left to the heartbeat to end; nothing of the
    // outbox's state depends on it (entries are acknowledged in the stream, not the broker).
    await withinMs(
      this.channel.close().catch(() => undefined),
      closeTimeoutMs,
    );
    await withinMs(
      this.connection.close().catch(() => undefined),
      closeTimeoutMs,
    );
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    if (!this.closing) this.log.warn("broker channel failed", { error });
    this.wakeDrainWaiters();
    for (const listener of this.failureListeners.splice(0)) listener(error);
  }

  private wakeDrainWaiters(): void {
    for (const wake of this.drainWaiters.splice(0)) wake();
  }
}
