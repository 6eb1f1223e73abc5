// FramePublisher against the real broker: pre-encoded publishes arrive with every property
// intact and are confirmed, and a publish the encoder does not take (a body larger than one
// frame) goes through amqplib's own publish with the same result.

import { afterAll, beforeAll, expect, test } from "bun:test";
import amqp, { type ChannelModel, type ConfirmChannel, type GetMessage } from "amqplib";
import { FramePublisher } from "../../src/infra/amqp/fast-publish";
import { stackStartTimeoutMs, testStack } from "../support/stack";

let connection: ChannelModel;
let channel: ConfirmChannel;
let queue: string;

beforeAll(async () => {
  connection = await amqp.connect((await testStack()).brokerUrl);
  channel = await connection.createConfirmChannel();
  queue = (await channel.assertQueue("", { exclusive: true, autoDelete: true })).queue;
}, stackStartTimeoutMs);

afterAll(async () => {
  await connection.close().catch(() => undefined);
});

async function getOne(): Promise<GetMessage> {
  for (let i = 0; i < 100; i++) {
    const message = await channel.get(queue, { noAck: true });
    if (message) return message;
    await Bun.sleep(20);
  }
  throw new Error("no message arrived");
}

const smallBody = '{"price":"100","note":"€"}';

async function publishAndReceive(publisher: FramePublisher, body: string): Promise<GetMessage> {
  const confirmed = new Promise<unknown>((resolve) => {
    publisher.publish(
      "",
      queue,
      body,
      true,
      {
        contentType: "application/json",
        headers: [
          { name: "x-partition-offset", value: "1700000000000-7" },
          { name: "x-partition-sequence", value: "7" },
        ],
        persistent: true,
        correlationId: "corr-1",
        replyTo: "reply-queue",
        messageId: "cmd-1:0:order.rested.v1",
        timestamp: 1_764_000_000_123,
        type: "order.rested.v1",
      },
      resolve,
    );
  });
  expect(await confirmed).toBeNull();
  return getOne();
}

function expectIntact(message: GetMessage, body: string): void {
  expect(message.content.toString()).toBe(body);
  const p = message.properties;
  expect(p.contentType).toBe("application/json");
  expect(p.headers?.["x-partition-offset"]).toBe("1700000000000-7");
  expect(p.headers?.["x-partition-sequence"]).toBe("7");
  expect(p.deliveryMode).toBe(2);
  expect(p.correlationId).toBe("corr-1");
  expect(p.replyTo).toBe("reply-queue");
  expect(p.messageId).toBe("cmd-1:0:order.rested.v1");
  expect(p.timestamp).toBe(1_764_000_000_123);
  expect(p.type).toBe("order.rested.v1");
}

test("pre-encoded publishes are confirmed and arrive intact", async () => {
  const publisher = new FramePublisher(channel);
  expect(publisher.encoding).toBe(true);
  expectIntact(await publishAndReceive(publisher, smallBody), smallBody);
});

test("a body larger than one frame goes through amqplib, with the same result", async () => {
  const publisher = new FramePublisher(channel);
  const large = JSON.stringify({ note: "x".repeat(300_000) });
  expectIntact(await publishAndReceive(publisher, large), large);
});

test("a closed channel refuses a publish the way amqplib does", async () => {
  const closing = await connection.createConfirmChannel();
  const publisher = new FramePublisher(closing);
  expect(publisher.encoding).toBe(true);
  await closing.close();
  expect(() => publisher.publish("", queue, smallBody, false, { persistent: true })).toThrow(
    /closed/i,
  );
});

test("a publish amqplib refuses leaves no confirm callback behind: later confirms settle their own publishes", async () => {
  const own = await connection.createConfirmChannel();
  const publisher = new FramePublisher(own);
  let strayConfirm = false;
  // A message id over 255 bytes fits no AMQP short string: the encoder leaves it to amqplib,
  // which throws.
  expect(() =>
    publisher.publish("", queue, smallBody, false, { messageId: "€".repeat(100) }, () => {
      strayConfirm = true;
    }),
  ).toThrow(/messageId/);
  const confirms = [1, 2, 3].map(
    (n) =>
      new Promise<number>((resolve) => {
        publisher.publish("", queue, smallBody, false, { messageId: `m${n}` }, () => resolve(n));
      }),
  );
  const settled = await Promise.race([Promise.all(confirms), Bun.sleep(5000).then(() => null)]);
  expect(settled).toEqual([1, 2, 3]);
  expect(strayConfirm).toBe(false);
  await own.close();
  for (let n = 0; n < 3; n++) await getOne();
});
