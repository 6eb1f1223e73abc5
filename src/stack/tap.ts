/**
 * The stack's tap: one bounded queue bound to every event exchange, so that on a stack a
 * person tries by hand no event is ever unroutable (the outbox would otherwise retry the
 * first one until some queue is bound) and nothing grows without bound (the oldest message
 * is dropped past the limit).
 */
import { connectBroker } from "../infra/amqp/connect";
import { allEventExchanges, declareEventExchanges } from "../infra/amqp/topology";

export const tapQueue = "matchd.tap";
/** Enough to read a first session's events back; a quorum queue drops the oldest past it. */
export const tapMaxMessages = 10_000;

export async function declareTap(brokerUrl: string): Promise<void> {
  const connection = await connectBroker(brokerUrl, "matchd-stack-tap");
  try {
    const channel = await connection.createChannel();
    await declareEventExchanges(channel);
    await channel.assertQueue(tapQueue, {
      durable: true,
      arguments: {
        "x-queue-type": "quorum",
        "x-max-length": tapMaxMessages,
        "x-overflow": "drop-head",
      },
    });
    for (const exchange of allEventExchanges) {
      await channel.bindQueue(tapQueue, exchange, exchange);
    }
    await channel.close();
  } finally {
    await connection.close().catch(() => undefined);
  }
}
