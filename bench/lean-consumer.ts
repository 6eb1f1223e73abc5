/**
 * A minimal AMQP 0-9-1 consumer for the benches' sinks: one connection, one channel, one
 * exclusive auto-deleted queue bound to the given exchanges (a quorum queue on a cluster's
 * node list, see `replicated`), consumed without acknowledgements, handing each delivery's message id, correlation id and body to a
 * callback. Why not amqplib: on this 2-core machine the bench shares the CPU with the system
 * it measures, and amqplib's receive path (stream machinery, generic frame and property
 * decoding, an object per message) cost the bench 12-16 µs per event, about a tenth of the
 * outbox drain's whole CPU. This reads frames straight off the socket and decodes only the
 * two properties the sinks use. It is bench tooling: services use amqplib.
 */

import type { Socket } from "bun";
import { brokerUrls, connectToFirstAnswering } from "../src/infra/amqp/broker-urls";
import {
  CLASS_BASIC as BASIC,
  BASIC_DELIVER,
  CLASS_CHANNEL as CHANNEL,
  CLASS_CONNECTION as CONNECTION,
  CLASS_EXCHANGE as EXCHANGE,
  FLAG_CONTENT_ENCODING,
  FLAG_CONTENT_TYPE,
  FLAG_CORRELATION_ID,
  FLAG_DELIVERY_MODE,
  FLAG_EXPIRATION,
  FLAG_HEADERS,
  FLAG_MESSAGE_ID,
  FLAG_PRIORITY,
  FLAG_REPLY_TO,
  FRAME_BODY,
  FRAME_END,
  FRAME_HEADER,
  FRAME_HEARTBEAT,
  FRAME_METHOD,
  FRAME_OVERHEAD,
  CLASS_QUEUE as QUEUE,
} from "../src/infra/amqp/wire";

/** connection.close and channel.close method ids. */
const CLOSE = { [CONNECTION]: 50, [CHANNEL]: 40 } as const;

/** One delivery as the sinks see it. */
export interface LeanDelivery {
  messageId: string | undefined;
  correlationId: string | undefined;
  body: Buffer;
}

export interface LeanConsumerOptions {
  /** amqp://user:password@host:port/vhost */
  url: string;
  /** Shown in the broker's connection list. */
  name: string;
  /** Direct exchanges to declare (durable) and bind the queue to, routing key = exchange name. */
  exchanges: readonly string[];
  onDelivery(delivery: LeanDelivery): void;
  /**
   * Declare and bind the queue but start consuming only when consume() is called, so the queue
   * collects what is routed to it meanwhile (see messageCount()).
   */
  deferConsume?: boolean;
  /**
   * A quorum queue named for this consumer instead of an exclusive one, deleted by close():
   * on a cluster, a node's loss then cannot drop what the sink has not read. By default, a
   * sink's queue (one bound to exchanges) given a cluster's node list.
   */
  replicated?: boolean;
}

type Waiter = {
  classId: number;
  methodId: number;
  resolve(args: Buffer): void;
  reject(error: Error): void;
};

/** How long opening may take (connect, handshake, declarations, consume) before it fails. */
const OPEN_TIMEOUT_MS = 10_000;
/** How long close() waits for the broker's close-ok. */
const CLOSE_TIMEOUT_MS = 2000;

/**
 * Splits a byte stream into AMQP frames: `onFrame(type, channel, payload)` per whole frame, in
 * order; a frame cut by a chunk boundary waits for the rest. Throws on a frame without its end
 * marker or larger than `maxFrame`: the stream can no longer be trusted.
 */
export class FrameSplitter {
  private pending: Buffer | undefined;

  constructor(
    private readonly onFrame: (type: number, channel: number, payload: Buffer) => void,
    public maxFrame = 131072,
  ) {}

  push(chunk: Buffer): void {
    let data = chunk;
    if (this.pending !== undefined) {
      data = Buffer.concat([this.pending, chunk]);
      this.pending = undefined;
    }
    let at = 0;
    while (data.length - at >= FRAME_OVERHEAD) {
      const size = data.readUInt32BE(at + 3);
      if (size + FRAME_OVERHEAD > this.maxFrame) {
        throw new Error(`frame of ${size} bytes exceeds the negotiated maximum ${this.maxFrame}`);
      }
      const end = at + 7 + size;
      if (end >= data.length) break;
      if (data[end] !== FRAME_END) throw new Error(`malformed frame (no frame end at ${end})`);
      this.onFrame(data[at]!, data.readUInt16BE(at + 1), data.subarray(at + 7, end));
      at = end + 1;
    }
    if (at < data.length) this.pending = data.subarray(at);
  }
}

export class LeanConsumer {
  private readonly frames = new FrameSplitter((type, _channel, payload) =>
    this.frame(type, payload),
  );
  private waiter: Waiter | undefined;
  private failure: Error | undefined;
  /** Set once close() starts: the broker's closing the socket after that is no failure. */
  private closing = false;
  // The delivery being assembled from its method, header and body frames.
  private delivering = false;
  private bodySize = 0;
  private messageId: string | undefined;
  private correlationId: string | undefined;
  private readonly bodyParts: Buffer[] = [];
  private bodyBytes = 0;
  /** The queue the broker named. */
  queue = "";
  private consuming = false;
  /** The queue is a quorum queue of ours: close() deletes it. */
  private replicated = false;

  /** Bytes the socket has not taken yet (Bun's write may take part of a buffer). */
  private unsent: Buffer | undefined;
  private socket!: Socket<undefined>;

  private constructor(private readonly onDelivery: (delivery: LeanDelivery) => void) {}

  /** Why the connection ended early (a broker close, a socket error), once it has. */
  get failed(): Error | undefined {
    return this.failure;
  }

  /** Opens on the first node of `options.url` (one URL or a cluster's list) that answers. */
  static open(options: LeanConsumerOptions): Promise<LeanConsumer> {
    const replicated =
      options.replicated ?? (options.exchanges.length > 0 && brokerUrls(options.url).length > 1);
    return connectToFirstAnswering(
      options.url,
      (url) => LeanConsumer.openOn({ ...options, url, replicated }),
      () => false,
    );
  }

  private static async openOn(options: LeanConsumerOptions): Promise<LeanConsumer> {
    const url = new URL(options.url);
    if (url.protocol !== "amqp:") {
      throw new Error(`the bench's consumer speaks plain amqp:// only, not ${url.protocol}`);
    }
    const consumer = new LeanConsumer(options.onDelivery);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new Error(`broker did not complete opening within ${OPEN_TIMEOUT_MS} ms`);
        consumer.fail(error);
        reject(error);
      }, OPEN_TIMEOUT_MS);
    });
    timedOut.catch(() => undefined);
    try {
      // Bun's own sockets: node:net's stream layer cost more per event than the parsing here.
      const connecting = Bun.connect({
        hostname: url.hostname,
        port: Number(url.port || 5672),
        socket: {
          binaryType: "buffer",
          data: (_socket, chunk: Buffer) => consumer.receive(chunk),
          drain: () => consumer.flush(),
          error: (_socket, error) => consumer.fail(error),
          close: () => consumer.fail(new Error("broker connection closed")),
        },
      });
      const socket = await Promise.race([connecting, timedOut]);
      socket.setNoDelay(true);
      consumer.socket = socket;
      try {
        await consumer.handshake(url, options.name);
        await consumer.subscribe(options.exchanges, options.name, options.replicated === true);
        if (options.deferConsume !== true) await consumer.consume();
      } catch (error) {
        socket.end();
        throw error;
      }
    } finally {
      clearTimeout(timer);
    }
    return consumer;
  }

  /** Closes the connection politely; the broker deletes an exclusive queue with it. */
  async close(): Promise<void> {
    if (this.closing) return;
    if (this.failure) {
      this.closing = true;
      this.socket.end();
      return;
    }
    if (this.replicated) {
      // Bounded like the close: a queue left behind on a private stack harms nothing.
      const deleted = this.call(
        1,
        QUEUE,
        40,
        Buffer.concat([u16(0), shortstr(this.queue), octet(0)]),
      );
      await Promise.race([deleted, Bun.sleep(CLOSE_TIMEOUT_MS)]).catch(() => undefined);
    }
    const reply = Buffer.concat([u16(200), shortstr("bench done"), u16(0), u16(0)]);
    const closeOk = this.expect(CONNECTION, 51);
    this.send(0, CONNECTION, 50, reply);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
    });
    await Promise.race([closeOk, timeout]).catch(() => undefined);
    clearTimeout(timer);
    this.closing = true;
    this.socket.end();
  }

  private async handshake(url: URL, name: string): Promise<void> {
    const start = this.expect(CONNECTION, 10);
    this.write(Buffer.from("AMQP\x00\x00\x09\x01", "latin1"));
    await start;
    const user = decodeURIComponent(url.username || "guest");
    const password = decodeURIComponent(url.password || "guest");
    const tune = this.expect(CONNECTION, 30);
    this.send(
      0,
      CONNECTION,
      11,
      Buffer.concat([
        table({ connection_name: name, product: "matchd bench sink" }),
        shortstr("PLAIN"),
        longstr(`\0${user}\0${password}`),
        shortstr("en_US"),
      ]),
    );
    const tuneArgs = await tune;
    const channelMax = tuneArgs.readUInt16BE(0);
    const frameMax = tuneArgs.readUInt32BE(2);
    // 0 means no limit; anything larger than 1 GiB from a broker is a corrupt stream anyway.
    this.frames.maxFrame = frameMax === 0 ? 2 ** 30 : frameMax;
    // Heartbeats off: a bench run is short and the socket is on loopback.
    this.send(0, CONNECTION, 31, Buffer.concat([u16(channelMax), u32(frameMax), u16(0)]));
    const vhost = decodeURIComponent(url.pathname.slice(1)) || "/";
    await this.call(0, CONNECTION, 40, Buffer.concat([shortstr(vhost), shortstr(""), octet(0)]));
    await this.call(1, CHANNEL, 10, shortstr(""));
  }

  private async subscribe(
    exchanges: readonly string[],
    name: string,
    replicated: boolean,
  ): Promise<void> {
    const emptyTable = u32(0);
    for (const exchange of exchanges) {
      const durable = 2;
      await this.call(
        1,
        EXCHANGE,
        10,
        Buffer.concat([u16(0), shortstr(exchange), shortstr("direct"), octet(durable), emptyTable]),
      );
    }
    const durable = 2;
    const exclusiveAutoDelete = 4 | 8;
    const declared = await this.call(
      1,
      QUEUE,
      10,
      replicated
        ? Buffer.concat([
            u16(0),
            shortstr(`${name}-${process.pid}-${Date.now()}`),
            octet(durable),
            table({ "x-queue-type": "quorum" }),
          ])
        : Buffer.concat([u16(0), shortstr(""), octet(exclusiveAutoDelete), emptyTable]),
    );
    this.replicated = replicated;
    this.queue = declared.toString("utf8", 1, 1 + declared[0]!);
    for (const exchange of exchanges) {
      await this.call(
        1,
        QUEUE,
        20,
        Buffer.concat([
          u16(0),
          shortstr(this.queue),
          shortstr(exchange),
          shortstr(exchange),
          octet(0),
          emptyTable,
        ]),
      );
    }
  }

  /** Starts the deliveries (once; open() does it unless deferConsume was set). */
  async consume(): Promise<void> {
    if (this.consuming) return;
    this.consuming = true;
    const noAck = 2;
    await this.call(
      1,
      BASIC,
      20,
      Buffer.concat([u16(0), shortstr(this.queue), shortstr(""), octet(noAck), u32(0)]),
    );
  }

  /** The messages ready in the queue, as a passive queue.declare reports them. */
  async messageCount(): Promise<number> {
    const passive = 1;
    const declared = await this.call(
      1,
      QUEUE,
      10,
      Buffer.concat([u16(0), shortstr(this.queue), octet(passive), u32(0)]),
    );
    // declare-ok: queue name (short string), message count, consumer count.
    return declared.readUInt32BE(1 + declared[0]!);
  }

  /** Sends a synchronous method and resolves with the arguments of its -ok (method id + 1). */
  private call(channel: number, classId: number, methodId: number, args: Buffer): Promise<Buffer> {
    const reply = this.expect(classId, methodId + 1);
    this.send(channel, classId, methodId, args);
    return reply;
  }

  private expect(classId: number, methodId: number): Promise<Buffer> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<Buffer>((resolve, reject) => {
      this.waiter = { classId, methodId, resolve, reject };
    });
  }

  private send(channel: number, classId: number, methodId: number, args: Buffer): void {
    const payload = Buffer.concat([u16(classId), u16(methodId), args]);
    const frame = Buffer.allocUnsafe(payload.length + FRAME_OVERHEAD);
    frame[0] = FRAME_METHOD;
    frame.writeUInt16BE(channel, 1);
    frame.writeUInt32BE(payload.length, 3);
    payload.copy(frame, 7);
    frame[frame.length - 1] = FRAME_END;
    this.write(frame);
  }

  private write(bytes: Buffer): void {
    if (this.unsent !== undefined) {
      this.unsent = Buffer.concat([this.unsent, bytes]);
      return;
    }
    const written = this.socket.write(bytes);
    if (written < bytes.length) this.unsent = bytes.subarray(Math.max(written, 0));
  }

  private flush(): void {
    const unsent = this.unsent;
    this.unsent = undefined;
    if (unsent !== undefined) this.write(unsent);
  }

  private fail(error: Error): void {
    if (this.closing) return;
    this.failure ??= error;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.reject(this.failure);
  }

  /**
   * Feeds the socket's bytes to the frame splitter. A broken stream, or a delivery callback that
   * throws, ends the connection with that error: no later frame could be trusted to be counted.
   */
  private receive(chunk: Buffer): void {
    if (this.failure || this.closing) return;
    try {
      this.frames.push(chunk);
    } catch (error) {
      this.fail(error instanceof Error ? error : new Error(String(error)));
      this.socket.end();
    }
  }

  private frame(type: number, payload: Buffer): void {
    if (type === FRAME_BODY) {
      this.bodyParts.push(payload);
      this.bodyBytes += payload.length;
      if (this.delivering && this.bodyBytes >= this.bodySize) this.deliver();
      return;
    }
    if (type === FRAME_HEADER) {
      this.header(payload);
      return;
    }
    if (type === FRAME_HEARTBEAT) return;
    if (type !== FRAME_METHOD) return;
    const classId = payload.readUInt16BE(0);
    const methodId = payload.readUInt16BE(2);
    if (classId === BASIC && methodId === BASIC_DELIVER) {
      this.delivering = true;
      this.bodySize = 0;
      this.messageId = undefined;
      this.correlationId = undefined;
      this.bodyParts.length = 0;
      this.bodyBytes = 0;
      return;
    }
    if ((classId === CONNECTION || classId === CHANNEL) && methodId === CLOSE[classId]) {
      const text = payload.toString("utf8", 7, 7 + payload[6]!);
      const code = payload.readUInt16BE(4);
      // Answer the close, then fail whatever waits: the broker has refused something.
      this.send(classId === CONNECTION ? 0 : 1, classId, methodId + 1, Buffer.alloc(0));
      this.fail(
        new Error(
          `broker closed the ${classId === CONNECTION ? "connection" : "channel"}: ${code} ${text}`,
        ),
      );
      return;
    }
    const waiter = this.waiter;
    if (waiter !== undefined && waiter.classId === classId && waiter.methodId === methodId) {
      this.waiter = undefined;
      waiter.resolve(payload.subarray(4));
    }
  }

  /** Reads the body size and the message-id and correlation-id properties of a content header. */
  private header(payload: Buffer): void {
    if (!this.delivering) return;
    // class (2), weight (2), body size (8: the high half is 0 for any body a bench sends).
    this.bodySize = payload.readUInt32BE(8);
    const flags = payload.readUInt16BE(12);
    let at = 14;
    // Properties in flag order; only correlation-id and message-id are kept.
    if (flags & FLAG_CONTENT_TYPE) at += 1 + payload[at]!;
    if (flags & FLAG_CONTENT_ENCODING) at += 1 + payload[at]!;
    if (flags & FLAG_HEADERS) at += 4 + payload.readUInt32BE(at);
    if (flags & FLAG_DELIVERY_MODE) at += 1;
    if (flags & FLAG_PRIORITY) at += 1;
    if (flags & FLAG_CORRELATION_ID) {
      this.correlationId = payload.toString("utf8", at + 1, at + 1 + payload[at]!);
      at += 1 + payload[at]!;
    }
    if (flags & FLAG_REPLY_TO) at += 1 + payload[at]!;
    if (flags & FLAG_EXPIRATION) at += 1 + payload[at]!;
    if (flags & FLAG_MESSAGE_ID) {
      this.messageId = payload.toString("utf8", at + 1, at + 1 + payload[at]!);
    }
    if (this.bodySize === 0) this.deliver();
  }

  private deliver(): void {
    this.delivering = false;
    const parts = this.bodyParts;
    const body =
      parts.length === 1 ? parts[0]! : parts.length === 0 ? Buffer.alloc(0) : Buffer.concat(parts);
    this.onDelivery({ messageId: this.messageId, correlationId: this.correlationId, body });
  }
}

function octet(value: number): Buffer {
  return Buffer.from([value]);
}

function u16(value: number): Buffer {
  const buffer = Buffer.allocUnsafe(2);
  buffer.writeUInt16BE(value);
  return buffer;
}

function u32(value: number): Buffer {
  const buffer = Buffer.allocUnsafe(4);
  buffer.writeUInt32BE(value);
  return buffer;
}

function shortstr(text: string): Buffer {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length > 255) throw new RangeError(`AMQP short string over 255 bytes: ${text}`);
  return Buffer.concat([octet(bytes.length), bytes]);
}

function longstr(text: string): Buffer {
  const bytes = Buffer.from(text, "utf8");
  return Buffer.concat([u32(bytes.length), bytes]);
}

/** A field table of string values. */
function table(entries: Record<string, string>): Buffer {
  const fields = Object.entries(entries).map(([key, value]) =>
    Buffer.concat([shortstr(key), Buffer.from("S", "latin1"), longstr(value)]),
  );
  const body = Buffer.concat(fields);
  return Buffer.concat([u32(body.length), body]);
}
