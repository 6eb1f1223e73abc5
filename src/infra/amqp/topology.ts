/**
 * The contract's RabbitMQ names and declarations: the command exchange and per-partition
 * quorum queues, the event exchanges, and the conductor's dead-letter queue.
 */
import type { Channel, ChannelModel } from "amqplib";
import type { EventType } from "../../domain/types";
import type { Logger } from "../log";

export const commandExchange = "matching:commands";
export const commandDeadLetterQueue = "matching:commands.dead-letter";

export function commandQueue(partition: number): string {
  return `matching:commands.p${partition}`;
}

export const eventExchanges = {
  "order.rested.v1": "messages:order:create",
  "order.filled.v1": "messages:order:delete",
  "order.cancelled.v1": "messages:order:delete",
  "order.expired.v1": "messages:order:delete",
  "order.updated.v1": "messages:order:update",
  "deal.executed.v1": "messages:deal:create",
  "order.rejected.v1": "messages:order:reject",
  // docs/orders.md
  "order.stop-accepted.v1": "messages:order:create",
  "order.triggered.v1": "messages:order:update",
  "order.amended.v1": "messages:order:update",
  "pair.halted.v1": "messages:pair:update",
  "pair.resumed.v1": "messages:pair:update",
  "session.triggered.v1": "messages:session:update",
} as const satisfies Record<EventType, string>;

export const allEventExchanges: readonly string[] = [...new Set(Object.values(eventExchanges))];

export const commandQueueArguments = {
  "x-queue-type": "quorum",
  "x-single-active-consumer": true,
} as const;

/**
 * Declares the command exchange and the partition's queue. A queue that already exists
 * with other arguments is used as it is (a redeclare would fail with 406), after a
 * passive check, and its existence is logged.
 */
export async function declareCommandTopology(
  connection: ChannelModel,
  partition: number,
  log: Logger,
  { checkProducerRedeclare: checkRedeclare = true }: { checkProducerRedeclare?: boolean } = {},
): Promise<void> {
  const queue = commandQueue(partition);
  const setup = await connection.createChannel();
  // A refused declaration closes the channel with an 'error' event as well as rejecting the
  // call; amqplib throws an unheard 'error', so each channel here listens (see below).
  setup.on("error", ignoreChannelError);
  await setup.assertExchange(commandExchange, "direct", { durable: true });
  await setup.assertQueue(commandDeadLetterQueue, { durable: true });
  try {
    await setup.assertQueue(queue, { durable: true, arguments: commandQueueArguments });
    log.info("command queue declared", { queue, queueType: "quorum", singleActiveConsumer: true });
  } catch (error) {
    // The failed declare closed that channel; check the existing queue passively.
    const check = await connection.createChannel();
    check.on("error", ignoreChannelError);
    const existing = await check.checkQueue(queue);
    log.warn("command queue exists with other arguments; using it as it is", {
      queue,
      messageCount: existing.messageCount,
      declareError: (error as Error).message,
    });
    await check.bindQueue(queue, commandExchange, queue);
    await check.close();
    return;
  }
  await setup.bindQueue(queue, commandExchange, queue);
  await setup.close();
  if (checkRedeclare) await checkProducerRedeclare(connection, queue, log);
}

/**
 * Declares the queue the way the contract's producers do, with only single active consumer:
 * on a vhost without `--default-queue-type quorum` (the default vhost among them) that
 * redeclaration of a quorum queue fails with 406, and every such producer with it. A warning
 * at boot names the fix rather than leaving it to the producers' errors.
 */
async function checkProducerRedeclare(
  connection: ChannelModel,
  queue: string,
  log: Logger,
): Promise<void> {
  const probe = await connection.createChannel();
  probe.on("error", ignoreChannelError);
  try {
    await probe.assertQueue(queue, {
      durable: true,
      arguments: { "x-single-active-consumer": true },
    });
    await probe.close();
  } catch (error) {
    log.warn(
      "producers that declare the command queue with only x-single-active-consumer are refused on this vhost: create the vhost with --default-queue-type quorum and name it in the broker URL",
      { queue, declareError: (error as Error).message },
    );
  }
}

/** The rejected call reports the failure; the channel's 'error' event only needs a listener. */
function ignoreChannelError(): void {}

export async function declareEventExchanges(channel: Channel): Promise<void> {
  for (const exchange of allEventExchanges) {
    await channel.assertExchange(exchange, "direct", { durable: true });
  }
}
