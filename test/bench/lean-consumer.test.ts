// The benches' lean AMQP consumer against the test stack's RabbitMQ: properties after a
// headers table, bodies split over several frames, and a refused declaration.

import { expect, test } from "bun:test";
import amqp from "amqplib";
import { LeanConsumer, type LeanDelivery } from "../../src/bench/lean-consumer";
import { eventually } from "../support/eventually";
import { testStack } from "../support/stack";

test("delivers message id, correlation id and the whole body, in order", async () => {
  const { brokerUrl } = await testStack();
  const exchange = `lean-test-${Date.now().toString(36)}`;
  const received: LeanDelivery[] = [];
  const consumer = await LeanConsumer.open({
    url: brokerUrl,
    name: "lean-consumer-test",
    exchanges: [exchange],
    onDelivery: (delivery) => received.push(delivery),
  });
  const connection = await amqp.connect(brokerUrl);
  try {
    const channel = await connection.createConfirmChannel();
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
    await channel.close();
  } finally {
    await consumer.close();
    await connection.close().catch(() => undefined);
  }
}, 30_000);

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
