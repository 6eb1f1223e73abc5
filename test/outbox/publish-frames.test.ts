// The outbox's publish encoder must produce exactly the bytes amqplib would send for the
// same publish, for every shape it accepts, and refuse the shapes it does not handle.

import { describe, expect, test } from "bun:test";
// @ts-expect-error amqplib ships no types for its internal modules
import Args from "amqplib/lib/api_args.js";
// @ts-expect-error amqplib ships no types for its internal modules
import defs from "amqplib/lib/defs.js";
import { encodePublishFrames, type PublishFrameFields } from "../../src/infra/amqp/publish-frames";

type Encoder = (...args: unknown[]) => Buffer;

/** What amqplib's ConfirmChannel.publish writes for the same call (connection.sendMessage). */
function amqplibFrames(channel: number, f: PublishFrameFields): Buffer {
  const fields = Args.publish(f.exchange, f.routingKey, {
    persistent: true,
    mandatory: f.mandatory,
    messageId: f.messageId,
    type: f.type,
    contentType: f.contentType,
    headers: { [f.headerName]: f.headerValue },
  });
  const method = (defs.encodeMethod as Encoder)(defs.BasicPublish, channel, fields);
  const header = (defs.encodeProperties as Encoder)(
    defs.BasicProperties,
    channel,
    f.body.length,
    fields,
  );
  const bodyFrame = Buffer.alloc(f.body.length + 8);
  bodyFrame.writeUInt8(3, 0);
  bodyFrame.writeUInt16BE(channel, 1);
  bodyFrame.writeUInt32BE(f.body.length, 3);
  f.body.copy(bodyFrame, 7);
  bodyFrame.writeUInt8(0xce, f.body.length + 7);
  return Buffer.concat([method, header, bodyFrame]);
}

const event = (overrides: Partial<PublishFrameFields> = {}): PublishFrameFields => ({
  exchange: "messages:deal:create",
  routingKey: "messages:deal:create",
  mandatory: true,
  contentType: "application/json",
  headerName: "x-partition-offset",
  headerValue: "1700000000000-12",
  messageId: "3f2a9c4e-1b2d-4c5e-8f90-123456789abc:2:deal.executed.v1",
  type: "deal.executed.v1",
  body: Buffer.from(JSON.stringify({ schemaVersion: 1, payload: { price: "100" } })),
  ...overrides,
});

describe("encodePublishFrames", () => {
  test.each([
    ["a typical event", 1, event()],
    ["another channel number", 513, event()],
    ["mandatory off", 1, event({ mandatory: false })],
    [
      "non-ASCII ids and body",
      7,
      event({ messageId: "ordre-é-ü:0:x", body: Buffer.from('{"a":"€"}') }),
    ],
    ["255-byte message id", 1, event({ messageId: "m".repeat(255) })],
    ["a 4 KiB body", 1, event({ body: Buffer.alloc(4096, 97) })],
  ])("%s: byte-identical to amqplib", (_name, channel, fields) => {
    expect(encodePublishFrames(channel, 131072, fields)).toEqual(amqplibFrames(channel, fields));
  });

  test("shapes it does not handle are left to amqplib", () => {
    expect(encodePublishFrames(1, 131072, event({ messageId: "m".repeat(256) }))).toBeUndefined();
    expect(encodePublishFrames(1, 131072, event({ body: Buffer.alloc(0) }))).toBeUndefined();
    expect(encodePublishFrames(1, 4096, event({ body: Buffer.alloc(4089) }))).toBeUndefined();
    expect(encodePublishFrames(1, 4096, event({ body: Buffer.alloc(4088) }))).toBeDefined();
  });
});
