/**
 * Publishes on an amqplib channel with frames from encodePublishFrames, doing exactly
 * what amqplib's publish does with them (register the confirm callback on a confirm
 * channel, queue the bytes on the channel's ordered outgoing buffer). When amqplib's
 * internals are not as expected, or a publish does not fit the encoder, it calls
 * amqplib's own publish instead, so behaviour never depends on the shortcut.
 */
import type { Channel, ConfirmChannel, Options } from "amqplib";
import { encodePublishFrames, type PublishProperties } from "./publish-frames";

/** The part of amqplib 0.10's channel internals a pre-encoded publish relies on. */
interface RawChannel {
  ch: number;
  pushConfirmCallback?(callback: ((error: unknown) => void) | undefined): void;
  connection: {
    frameMax: number;
    sentSinceLastCheck: boolean;
    channels: ({ channel: unknown; buffer: { write(chunk: Buffer): boolean } } | null)[];
  };
}

function rawChannel(channel: Channel, confirms: boolean): RawChannel | null {
  const raw = channel as unknown as Partial<RawChannel>;
  const connection = raw.connection;
  if (
    typeof raw.ch !== "number" ||
    (confirms && typeof raw.pushConfirmCallback !== "function") ||
    typeof connection?.frameMax !== "number" ||
    typeof connection.channels?.[raw.ch]?.buffer?.write !== "function"
  ) {
    return null;
  }
  return raw as RawChannel;
}

/**
 * amqplib marks a closing or closed channel or connection by giving it its own
 * `sendMessage` that throws; its prototype's is the working one.
 */
function isOpen(raw: RawChannel): boolean {
  return !Object.hasOwn(raw, "sendMessage") && !Object.hasOwn(raw.connection, "sendMessage");
}

export type ConfirmCallback = (error: unknown) => void;

export class FramePublisher {
  private readonly raw: RawChannel | null;
  private readonly confirms: boolean;

  /** `channel` may be a plain or a confirm channel; `onConfirm` matters only on the latter. */
  constructor(private readonly channel: Channel | ConfirmChannel) {
    this.confirms = "waitForConfirms" in channel;
    this.raw = rawChannel(channel, this.confirms);
  }

  /** Whether publishes go out as pre-encoded frames (false: through amqplib). */
  get encoding(): boolean {
    return this.raw !== null;
  }

  /** Like amqplib's publish: false means wait for the channel's 'drain'. */
  publish(
    exchange: string,
    routingKey: string,
    body: Buffer | string,
    mandatory: boolean,
    properties: PublishProperties,
    onConfirm?: ConfirmCallback,
  ): boolean {
    const raw = this.raw;
    if (raw !== null) {
      const frames = encodePublishFrames(raw.ch, raw.connection.frameMax, {
        exchange,
        routingKey,
        mandatory,
        properties,
        body,
      });
      const out = raw.connection.channels[raw.ch];
      if (frames !== undefined && out?.channel === raw && isOpen(raw)) {
        if (this.confirms) raw.pushConfirmCallback?.(onConfirm);
        raw.connection.sentSinceLastCheck = true;
        return out.buffer.write(frames);
      }
      // Anything else (a closing or closed channel or connection, a reused channel number,
      // a publish the encoder does not take) goes through amqplib, which throws or copes.
    }
    const content = typeof body === "string" ? Buffer.from(body) : body;
    const options = amqplibOptions(mandatory, properties);
    if (this.confirms) {
      const unconfirmed = (this.channel as unknown as { unconfirmed?: unknown[] }).unconfirmed;
      const before = unconfirmed?.length ?? -1;
      try {
        return (this.channel as ConfirmChannel).publish(
          exchange,
          routingKey,
          content,
          options,
          onConfirm,
        );
      } catch (error) {
        // amqplib registers the confirm callback before it encodes the message: one it refuses
        // (a property too long for its field, a closed channel) would leave a callback for a
        // message never sent, and every later confirm would settle the publish before its own.
        if (unconfirmed !== undefined && unconfirmed.length === before + 1) unconfirmed.pop();
        throw error;
      }
    }
    return this.channel.publish(exchange, routingKey, content, options);
  }
}

/** The amqplib publish options that mean the same as `properties`. */
export function amqplibOptions(mandatory: boolean, p: PublishProperties): Options.Publish {
  const options: Options.Publish = { mandatory };
  if (p.contentType !== undefined) options.contentType = p.contentType;
  if (p.headers !== undefined)
    options.headers = Object.fromEntries(p.headers.map((h) => [h.name, h.value]));
  if (p.persistent) options.persistent = true;
  if (p.correlationId !== undefined) options.correlationId = p.correlationId;
  if (p.replyTo !== undefined) options.replyTo = p.replyTo;
  if (p.messageId !== undefined) options.messageId = p.messageId;
  if (p.timestamp !== undefined) options.timestamp = p.timestamp;
  if (p.type !== undefined) options.type = p.type;
  return options;
}
