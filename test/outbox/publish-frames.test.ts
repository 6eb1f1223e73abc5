// The publish encoder must produce exactly the bytes amqplib would send for the same
// publish, for every property combination it accepts, and refuse what it does not handle.

import { describe, expect, test } from "bun:test";
// @ts-expect-error amqplib ships no types for its internal modules
import Args from "amqplib/lib/api_args.js";
// @ts-expect-error amqplib ships no types for its internal modules
import defs from "amqplib/lib/defs.js";
import { amqplibOptions } from "../../src/infra/amqp/fast-publish";
import {
  encodePublishFrames,
  type PublishFrameFields,
  type PublishProperties,
} from "../../src/infra/amqp/publish-frames";

type Encoder = (...args: unknown[]) => Buffer;

/** What amqplib's publish writes for the same call (connection.sendMessage). */
function amqplibFrames(channel: number, f: PublishFrameFields): Buffer {
  const fields = Args.publish(f.exchange, f.routingKey, amqplibOptions(f.mandatory, f.properties));
  const body = typeof f.body === "string" ? Buffer.from(f.body) : f.body;
  const method = (defs.encodeMethod as Encoder)(defs.BasicPublish, channel, fields);
  const header = (defs.encodeProperties as Encoder)(
    defs.BasicProperties,
    channel,
    body.length,
    fields,
  );
  const bodyFrame = Buffer.alloc(body.length + 8);
  bodyFrame.writeUInt8(3, 0);
  bodyFrame.writeUInt16BE(channel, 1);
  bodyFrame.writeUInt32BE(body.length, 3);
  body.copy(bodyFrame, 7);
  bodyFrame.writeUInt8(0xce, body.length + 7);
  return Buffer.concat([method, header, bodyFrame]);
}

const outboxProperties: PublishProperties = {
  contentType: "application/json",
  headers: [
    { name: "x-partition-offset", value: "1700000000000-12" },
    { name: "x-partition-sequence", value: "4711" },
  ],
  persistent: true,
  messageId: "3f2a9c4e-1b2d-4c5e-8f90-123456789abc:2:deal.executed.v1",
  type: "deal.executed.v1",
};

const publish = (
  properties: PublishProperties = outboxProperties,
  overrides: Partial<PublishFrameFields> = {},
): PublishFrameFields => ({
  exchange: "messages:deal:create",
  routingKey: "messages:deal:create",
  mandatory: true,
  properties,
  body: JSON.stringify({ schemaVersion: 1, payload: { price: "100" } }),
  ...overrides,
});

describe("encodePublishFrames", () => {
  test.each([
    ["an outbox event", 1, publish()],
    ["another channel number", 513, publish()],
    [
      "mandatory off, body as bytes",
      1,
      publish(outboxProperties, { mandatory: false, body: Buffer.from("{}") }),
    ],
    [
      "non-ASCII ids and body",
      7,
      publish({ ...outboxProperties, messageId: "ordre-é-ü:0:x" }, { body: '{"a":"€"}' }),
    ],
    ["255-byte message id", 1, publish({ ...outboxProperties, messageId: "m".repeat(255) })],
    ["a 4 KiB body", 1, publish(outboxProperties, { body: Buffer.alloc(4096, 97) })],
    [
      "a command as producers send it",
      1,
      publish(
        {
          persistent: true,
          contentType: "application/json",
          correlationId: "c-1",
          messageId: "c-1",
          timestamp: 1_764_000_000_123,
        },
        { exchange: "matching:commands", routingKey: "matching:commands.p0", mandatory: false },
      ),
    ],
    [
      "an RPC command",
      1,
      publish(
        { persistent: true, replyTo: "amq.gen-abc", correlationId: "c-2", timestamp: 0 },
        { exchange: "matching:commands", routingKey: "matching:commands.p0", mandatory: false },
      ),
    ],
    [
      "a reply",
      2,
      publish(
        { correlationId: "c-2", contentType: "application/json" },
        { exchange: "", routingKey: "amq.gen-abc", mandatory: false },
      ),
    ],
    ["no properties at all", 1, publish({})],
  ])("%s: byte-identical to amqplib", (_name, channel, fields) => {
    expect(encodePublishFrames(channel, 131072, fields)).toEqual(amqplibFrames(channel, fields));
  });

  test("shapes it does not handle are left to amqplib", () => {
    const long = { ...outboxProperties, messageId: "m".repeat(256) };
    expect(encodePublishFrames(1, 131072, publish(long))).toBeUndefined();
    expect(encodePublishFrames(1, 131072, publish(outboxProperties, { body: "" }))).toBeUndefined();
    const big = (size: number) => publish(outboxProperties, { body: Buffer.alloc(size) });
    expect(encodePublishFrames(1, 4096, big(4089))).toBeUndefined();
    expect(encodePublishFrames(1, 4096, big(4088))).toBeDefined();
    expect(encodePublishFrames(1, 131072, publish({ timestamp: 1.5 }))).toBeUndefined();
    expect(encodePublishFrames(1, 131072, publish({ timestamp: -1 }))).toBeUndefined();
  });
});
