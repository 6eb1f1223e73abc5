/**
 * A producer: sends one order.place command as RPC and waits for its durable result. An
 * attempt not answered in time is sent again with the SAME command id: the conductor answers
 * a command it already ran from its stored result instead of running it twice.
 * Run: MATCHING_BROKER_URL=amqp://... bun examples/producer.ts [pairId] [side] [price] [volume]
 */
import { randomUUID } from "node:crypto";
import amqp from "amqplib";

const brokerUrl = process.env.MATCHING_BROKER_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const partitionCount = Number(process.env.MATCHING_PARTITION_COUNT ?? "1");
const attemptTimeoutMs = Number(process.env.EXAMPLE_ATTEMPT_TIMEOUT_MS ?? "5000");
const [pairText = "1", side = "bid", price = "100", volume = "1"] = process.argv.slice(2);
const pairId = Number(pairText);
const partition = pairId % partitionCount;
const queue = `matching:commands.p${partition}`;

// One id for every attempt: the conductor's dedup key. A new id would be a new order.
const commandId = randomUUID();
const now = Date.now();
const order = { id: randomUUID(), userId: "example", side, type: "limit", pairId, price, volume };
const payload = { ...order, timestamp: now, volumeTotal: volume, quoteVolume: "0", role: "taker" };
const precisions = { priceDecimals: 2, amountDecimals: 8, quoteDecimals: 8 };
const command = {
  schemaVersion: 1,
  commandId,
  correlationId: commandId,
  type: "order.place",
  submittedAt: new Date(now).toISOString(),
  pairId,
  partition,
  payload: { ...payload, ...precisions },
};

const connection = await amqp.connect(brokerUrl);
const channel = await connection.createConfirmChannel();
// Declared as the contract's producers may: the conductor's queue, single active consumer.
await channel.assertExchange("matching:commands", "direct", { durable: true });
const queueArguments = { "x-single-active-consumer": true };
await channel.assertQueue(queue, { durable: true, arguments: queueArguments });
await channel.bindQueue(queue, "matching:commands", queue);
const replies = await channel.assertQueue("", { exclusive: true });
const result = new Promise<unknown>((resolve) => {
  const onReply = (message: amqp.ConsumeMessage | null) => {
    if (message?.properties.correlationId !== commandId) return;
    resolve(JSON.parse(message.content.toString()));
  };
  void channel.consume(replies.queue, onReply, { noAck: true });
});

const properties = { persistent: true, contentType: "application/json" };
const rpc = { messageId: commandId, correlationId: commandId, replyTo: replies.queue };
for (let attempt = 1; attempt <= 5; attempt++) {
  const body = Buffer.from(JSON.stringify(command));
  channel.publish("matching:commands", queue, body, { ...properties, ...rpc });
  await channel.waitForConfirms(); // the broker has it: it survives a broker restart
  const reply = await Promise.race([result, Bun.sleep(attemptTimeoutMs).then(() => null)]);
  if (reply !== null) {
    console.log(JSON.stringify({ attempt, result: reply }));
    await connection.close();
    process.exit(0);
  }
  console.error(`attempt ${attempt}: no result in ${attemptTimeoutMs} ms; resending ${commandId}`);
}
await connection.close();
process.exit(1);
