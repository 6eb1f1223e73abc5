/**
 * An idempotent event consumer. Delivery is at least once, so every event is applied inside
 * one Valkey script together with its inbox entry, keyed by event id: a redelivered or
 * republished event finds its entry and changes nothing. Here "applying" counts events by type.
 * Run: MATCHING_BROKER_URL=amqp://... MATCHING_DATASTORE_URL=redis://... bun examples/consumer.ts
 */
import amqp from "amqplib";
import Redis from "ioredis";

const brokerUrl = process.env.MATCHING_BROKER_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const queue = process.env.EXAMPLE_QUEUE ?? "example.consumer";
const exchanges = [
  "messages:order:create",
  "messages:order:update",
  "messages:order:delete",
  "messages:deal:create",
  "messages:order:reject",
  "messages:pair:update",
];
const inboxTtlSeconds = 7 * 24 * 3600; // longer than any redelivery can come late

const valkey = new Redis(process.env.MATCHING_DATASTORE_URL ?? "redis://127.0.0.1:6379");
// KEYS[1] inbox entry, KEYS[2] counts hash; ARGV[1] TTL, ARGV[2] event type. 1 = applied.
const applyOnce = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return 1`;

const connection = await amqp.connect(brokerUrl);
const channel = await connection.createChannel();
await channel.prefetch(100);
// A quorum queue: it survives a broker node's loss. Bound to every event exchange.
await channel.assertQueue(queue, { durable: true, arguments: { "x-queue-type": "quorum" } });
for (const exchange of exchanges) {
  await channel.assertExchange(exchange, "direct", { durable: true });
  await channel.bindQueue(queue, exchange, exchange);
}

await channel.consume(queue, async (message) => {
  if (message === null) return;
  const eventId = message.properties.messageId as string; // = the envelope's eventId
  let type: string;
  try {
    ({ type } = JSON.parse(message.content.toString()) as { type: string });
  } catch {
    console.error(`unreadable event ${eventId} skipped`); // no retry would make it readable
    return channel.ack(message);
  }
  try {
    const inbox = `${queue}:inbox:${eventId}`;
    const applied = await valkey.eval(
      applyOnce,
      2,
      inbox,
      `${queue}:counts`,
      inboxTtlSeconds,
      type,
    );
    console.log(`${applied === 1 ? "applied" : "duplicate"} ${eventId} ${type}`);
    channel.ack(message); // only after the inbox holds it: a crash before means redelivery
  } catch (error) {
    console.error(`event ${eventId} not applied (${error}); redelivered`);
    channel.nack(message, false, true);
  }
});

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, async () => {
    await connection.close();
    valkey.disconnect();
    process.exit(0);
  });
}
