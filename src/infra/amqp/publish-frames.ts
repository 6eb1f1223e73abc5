/**
 * Encodes one AMQP 0-9-1 basic.publish (method, content header and one body frame) into a
 * single buffer for the one property set the outbox sends. amqplib builds the same bytes
 * through generic field and table encoders, which was a quarter of the outbox's CPU per
 * event; the result here is byte-identical (tested against amqplib's own encoder).
 */

const FRAME_METHOD = 1;
const FRAME_HEADER = 2;
const FRAME_BODY = 3;
const FRAME_END = 0xce;
const BASIC_CLASS = 60;
const BASIC_PUBLISH = 40;
const SHORTSTR_MAX = 255;

// Property flags in the order the content header lists their values.
const FLAG_CONTENT_TYPE = 1 << 15;
const FLAG_HEADERS = 1 << 13;
const FLAG_DELIVERY_MODE = 1 << 12;
const FLAG_MESSAGE_ID = 1 << 7;
const FLAG_TYPE = 1 << 5;
const PERSISTENT = 2;

export interface PublishFrameFields {
  exchange: string;
  routingKey: string;
  mandatory: boolean;
  contentType: string;
  /** One string-valued header (the outbox sends exactly one: x-partition-offset). */
  headerName: string;
  headerValue: string;
  messageId: string;
  type: string;
  body: Buffer;
}

/**
 * The frames of one persistent publish on `channel`, or undefined when a field does not
 * fit this simple shape (a short string over 255 bytes, a body that needs several frames
 * under `frameMax`): the caller then publishes through amqplib, which handles those.
 */
export function encodePublishFrames(
  channel: number,
  frameMax: number,
  f: PublishFrameFields,
): Buffer | undefined {
  const exchangeLength = Buffer.byteLength(f.exchange);
  const routingKeyLength = Buffer.byteLength(f.routingKey);
  const contentTypeLength = Buffer.byteLength(f.contentType);
  const headerNameLength = Buffer.byteLength(f.headerName);
  const headerValueLength = Buffer.byteLength(f.headerValue);
  const messageIdLength = Buffer.byteLength(f.messageId);
  const typeLength = Buffer.byteLength(f.type);
  if (
    exchangeLength > SHORTSTR_MAX ||
    routingKeyLength > SHORTSTR_MAX ||
    contentTypeLength > SHORTSTR_MAX ||
    headerNameLength > SHORTSTR_MAX ||
    messageIdLength > SHORTSTR_MAX ||
    typeLength > SHORTSTR_MAX ||
    f.body.length === 0 ||
    (frameMax > 0 && f.body.length + 8 > frameMax)
  ) {
    return undefined;
  }
  const methodSize = 2 + 2 + 2 + 1 + exchangeLength + 1 + routingKeyLength + 1;
  const tableSize = 1 + headerNameLength + 1 + 4 + headerValueLength;
  const propertiesSize =
    1 + contentTypeLength + 4 + tableSize + 1 + 1 + messageIdLength + 1 + typeLength;
  const headerSize = 2 + 2 + 8 + 2 + propertiesSize;
  const bodySize = f.body.length;
  const out = Buffer.allocUnsafe(8 + methodSize + 8 + headerSize + 8 + bodySize);

  let o = 0;
  // basic.publish method frame
  o = out.writeUInt8(FRAME_METHOD, o);
  o = out.writeUInt16BE(channel, o);
  o = out.writeUInt32BE(methodSize, o);
  o = out.writeUInt16BE(BASIC_CLASS, o);
  o = out.writeUInt16BE(BASIC_PUBLISH, o);
  o = out.writeUInt16BE(0, o); // reserved (ticket)
  o = writeShortString(out, o, f.exchange, exchangeLength);
  o = writeShortString(out, o, f.routingKey, routingKeyLength);
  o = out.writeUInt8(f.mandatory ? 1 : 0, o); // bit 0 mandatory, bit 1 immediate
  o = out.writeUInt8(FRAME_END, o);

  // content header frame
  o = out.writeUInt8(FRAME_HEADER, o);
  o = out.writeUInt16BE(channel, o);
  o = out.writeUInt32BE(headerSize, o);
  o = out.writeUInt16BE(BASIC_CLASS, o);
  o = out.writeUInt16BE(0, o); // weight
  o = out.writeUInt32BE(0, o); // body size, high 32 bits
  o = out.writeUInt32BE(bodySize, o);
  o = out.writeUInt16BE(
    FLAG_CONTENT_TYPE | FLAG_HEADERS | FLAG_DELIVERY_MODE | FLAG_MESSAGE_ID | FLAG_TYPE,
    o,
  );
  o = writeShortString(out, o, f.contentType, contentTypeLength);
  o = out.writeUInt32BE(tableSize, o);
  o = writeShortString(out, o, f.headerName, headerNameLength);
  o += out.write("S", o, "latin1"); // long string field value
  o = out.writeUInt32BE(headerValueLength, o);
  o += out.write(f.headerValue, o, "utf8");
  o = out.writeUInt8(PERSISTENT, o);
  o = writeShortString(out, o, f.messageId, messageIdLength);
  o = writeShortString(out, o, f.type, typeLength);
  o = out.writeUInt8(FRAME_END, o);

  // body frame
  o = out.writeUInt8(FRAME_BODY, o);
  o = out.writeUInt16BE(channel, o);
  o = out.writeUInt32BE(bodySize, o);
  o += f.body.copy(out, o);
  out.writeUInt8(FRAME_END, o);
  return out;
}

function writeShortString(out: Buffer, offset: number, text: string, length: number): number {
  const o = out.writeUInt8(length, offset);
  return o + out.write(text, o, "utf8");
}
