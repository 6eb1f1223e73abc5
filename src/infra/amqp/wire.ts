/**
 * AMQP 0-9-1 wire constants shared by the code that writes or reads frames itself: the
 * outbox's pre-encoded publishes (publish-frames) and the benches' lean consumer.
 */

export const FRAME_METHOD = 1;
export const FRAME_HEADER = 2;
export const FRAME_BODY = 3;
export const FRAME_HEARTBEAT = 8;
export const FRAME_END = 0xce;
/** Type (1), channel (2), size (4) and the end marker (1) around every frame's payload. */
export const FRAME_OVERHEAD = 8;

export const CLASS_CONNECTION = 10;
export const CLASS_CHANNEL = 20;
export const CLASS_EXCHANGE = 40;
export const CLASS_QUEUE = 50;
export const CLASS_BASIC = 60;
export const BASIC_PUBLISH = 40;
export const BASIC_DELIVER = 60;

// Content header property flags; the header lists the present values in this order.
export const FLAG_CONTENT_TYPE = 1 << 15;
export const FLAG_CONTENT_ENCODING = 1 << 14;
export const FLAG_HEADERS = 1 << 13;
export const FLAG_DELIVERY_MODE = 1 << 12;
export const FLAG_PRIORITY = 1 << 11;
export const FLAG_CORRELATION_ID = 1 << 10;
export const FLAG_REPLY_TO = 1 << 9;
export const FLAG_EXPIRATION = 1 << 8;
export const FLAG_MESSAGE_ID = 1 << 7;
export const FLAG_TIMESTAMP = 1 << 6;
export const FLAG_TYPE = 1 << 5;

/** The most bytes an AMQP short string holds (names, ids, string properties). */
export const SHORTSTR_MAX = 255;
