// The benches' lean AMQP consumer: its frame splitter on streams cut at every size, and the
// consumer against the test stack's RabbitMQ (properties after a headers table, bodies over
// several frames, a refused declaration, a throwing callback, a replicated sink's queue).

import { expect, test } from "bun:test";
import amqp from "amqplib";
import { FrameSplitter, LeanConsumer, type LeanDelivery } from "../../bench/lean-consumer";
import { eventually } from "../support/eventually";
import { testStack } from "../support/stack";

/**
 * Runs `body` with a lean consumer of a fresh exchange and an amqplib confirm channel that
 * publishes to it; both are closed afterwards.
 */
async function withConsumer(
  onDelivery: (delivery: LeanDelivery) => void,
  body: (consumer: LeanConsumer, channel: amqp.ConfirmChannel, exchange: string) => Promise<void>,
  replicated?: boolean,
): Promise<void> {
  const { brokerUrl } = await testStack();
  const exchange = `lean-test-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  const consumer = await LeanConsumer.open({
    url: brokerUrl,
    name: "lean-consumer-test",
    exchanges: [exchange],
    onDelivery,
    replicated,
  });
  const connection = await amqp.connect(brokerUrl);
  try {
    const channel = await connection.createConfirmChannel();
    await body(consumer, channel, exchange);
    await channel.close();
  } finally {
    await consumer.close();
    await connection.close().catch(() => undefined);
  }
}

test("delivers message id, correlation id and the whole body, in order", async () => {
  const received: LeanDelivery[] = [];
  await withConsumer(
    (delivery) => received.push(delivery),
    async (_consumer, channel, exchange) => {
      // Larger than the broker's frame size (128 KiB): it arrives as several body frames.
      const large = Buffer.alloc(300_000);
      for (let i = 0; i < large.length; i++) large[i] = i % 251;
      const messages: [string, Buffer, amqp.Options.Publish][] = [
        [
          "every property",
          Buffer.from('{"a":1}'),
          {
            contentType: "application/json",
            contentEncoding: "identity",
            headers: { "x-partition-offset": "1-0", n: 7 },
            persistent: true,
            priority: 1,
            correlationId: "corr-1",
            replyTo: "nowhere",
            expiration: "60000",
            messageId: "id-1",
            type: "order.filled.v1",
          },
        ],
        ["no properties", Buffer.from("plain"), {}],
        ["empty body", Buffer.alloc(0), { messageId: "id-3" }],
        ["large body", large, { messageId: "id-4" }],
      ];
      for (const [, body, options] of messages) channel.publish(exchange, exchange, body, options);
      await channel.waitForConfirms();
      await eventually("all four deliveries", () => received.length === messages.length);
      expect(received.map((d) => d.messageId)).toEqual(["id-1", undefined, "id-3", "id-4"]);
      expect(received[0]!.correlationId).toBe("corr-1");
      expect(received[1]!.correlationId).toBeUndefined();
      for (let i = 0; i < messages.length; i++) {
        expect(Buffer.compare(received[i]!.body, messages[i]![1])).toBe(0);
      }
    },
  );
}, 30_000);

test("a replicated sink reads a quorum queue of its own, and close() deletes it", async () => {
  const received: string[] = [];
  let queue = "";
  await withConsumer(
    (delivery) => received.push(delivery.messageId ?? ""),
    async (consumer, channel, exchange) => {
      queue = consumer.queue;
      expect(queue).toStartWith("lean-consumer-test-");
      channel.publish(exchange, exchange, Buffer.from("{}"), { messageId: "q-1" });
      await channel.waitForConfirms();
      await eventually("the delivery", () => received.length === 1);
      expect(received).toEqual(["q-1"]);
      // A classic declaration of the same name is refused: the queue is a quorum queue.
      const probe = await amqp.connect((await testStack()).brokerUrl);
      probe.on("error", () => undefined);
      const refused = await (await probe.createChannel())
        .assertQueue(queue, { durable: true, arguments: { "x-queue-type": "classic" } })
        .then(
          () => "accepted",
          (error: Error) => error.message,
        );
      expect(refused).toContain("PRECONDITION_FAILED");
      await probe.close().catch(() => undefined);
    },
    true,
  );
  const connection = await amqp.connect((await testStack()).brokerUrl);
  connection.on("error", () => undefined);
  const channel = await connection.createChannel();
  const gone = await channel.checkQueue(queue).then(
    () => "exists",
    (error: Error) => error.message,
  );
  expect(gone).toContain("NOT_FOUND");
  await connection.close().catch(() => undefined);
});

test("a declaration the broker refuses fails open() with the broker's reason", async () => {
  const { brokerUrl } = await testStack();
  // Names starting with amq. are reserved: declaring one is refused with 403.
  const opening = LeanConsumer.open({
    url: brokerUrl,
    name: "lean-consumer-test",
    exchanges: ["amq.lean-test-reserved"],
    onDelivery: () => undefined,
  });
  await expect(opening).rejects.toThrow(/broker closed the channel: 403/);
}, 30_000);

/** One frame: type, channel, size, payload, end marker. */
function frame(type: number, channel: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(7);
  head[0] = type;
  head.writeUInt16BE(channel, 1);
  head.writeUInt32BE(payload.length, 3);
  return Buffer.concat([head, payload, Buffer.from([0xce])]);
}

test("the frame splitter yields the same frames however the stream is cut", () => {
  const frames: [number, number, Buffer][] = [
    [1, 0, Buffer.from("method")],
    [2, 1, Buffer.alloc(0)],
    [3, 1, Buffer.from("body with \xce inside")],
    [8, 0, Buffer.alloc(0)],
    [3, 7, Buffer.alloc(1000, 0xce)],
  ];
  const stream = Buffer.concat(
    frames.map(([type, channel, payload]) => frame(type, channel, payload)),
  );
  // Every slice size from 1 byte (headers and end markers split) to the whole stream at once.
  for (let slice = 1; slice <= stream.length; slice++) {
    const seen: [number, number, Buffer][] = [];
    const splitter = new FrameSplitter((type, channel, payload) =>
      seen.push([type, channel, Buffer.from(payload)]),
    );
    for (let at = 0; at < stream.length; at += slice)
      splitter.push(stream.subarray(at, at + slice));
    expect(seen).toEqual(frames);
  }
});

test("the frame splitter refuses a frame without its end marker or over the size limit", () => {
  const broken = frame(1, 0, Buffer.from("x"));
  broken[broken.length - 1] = 0;
  expect(() => new FrameSplitter(() => undefined).push(broken)).toThrow(/no frame end/);
  const large = frame(3, 1, Buffer.alloc(200));
  expect(() => new FrameSplitter(() => undefined, 100).push(large)).toThrow(/exceeds/);
});

test("a delivery callback that throws ends the consumer with that error", async () => {
  const refuse = () => {
    throw new Error("callback refused");
  };
  await withConsumer(refuse, async (consumer, channel, exchange) => {
    channel.publish(exchange, exchange, Buffer.from("x"), { messageId: "m" });
    await channel.waitForConfirms();
    await eventually("the consumer failed", () => consumer.failed !== undefined);
    expect(consumer.failed?.message).toBe("callback refused");
  });
}, 30_000);

test("an amqps:// URL is refused rather than sent in plain text", async () => {
  const opening = LeanConsumer.open({
    url: "amqps://guest:guest@127.0.0.1:5671/",
    name: "lean-consumer-test",
    exchanges: [],
    onDelivery: () => undefined,
  });
  await expect(opening).rejects.toThrow(/plain amqp/);
});
