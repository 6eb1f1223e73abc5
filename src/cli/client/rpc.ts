/**
 * Sends one command to its partition's queue as the contract's producers do (persistent,
 * JSON, confirmed) and, as an RPC, waits for the conductor's reply: sent only once the
 * command's commit is durable, so the reply is the command's durable result.
 */
import type { Channel, ChannelModel, ConsumeMessage } from "amqplib";
import type { CommandEnvelope, CommandResult } from "../../domain/index";
import { BrokerRefusedError, brokerErrorLine } from "../../infra/amqp/broker-errors";
import { connectBroker } from "../../infra/amqp/connect";
import { commandExchange, commandQueue, commandQueueArguments } from "../../infra/amqp/topology";
import { redactUrl } from "../../infra/redact";
import { ClientError } from "./client-error";

export interface SendOptions {
  brokerUrl: string;
  /** Wait for the durable result; false returns once the broker confirmed the command. */
  wait: boolean;
  timeoutMs: number;
  /**
   * The AMQP user-id property: the broker refuses it unless it is the connection's own user,
   * so the conductor can trust it (pair commands are authorised by it).
   */
  userId?: string;
}

/**
 * The user a broker URL logs in as: the first node's (a cluster's nodes share their users),
 * guest when it names none, as amqplib logs in then.
 */
export function brokerUser(brokerUrl: string): string {
  const first = brokerUrl.split(",")[0]!.trim();
  try {
    return decodeURIComponent(new URL(first).username) || "guest";
  } catch {
    return "guest";
  }
}

/** Opens a broker connection, naming a broker that is not there in one line. */
export async function openBroker(brokerUrl: string, name: string): Promise<ChannelModel> {
  try {
    const connection = await connectBroker(brokerUrl, name);
    connection.on("error", () => undefined); // a close during the command fails its wait
    return connection;
  } catch (error) {
    if (error instanceof BrokerRefusedError) throw error;
    throw new ClientError(
      `no broker answers at ${redactUrl(brokerUrl)} (${brokerErrorLine(error)}); start one with \`./matchd stack up --dir D && source D/env\`, or set MATCHING_BROKER_URL`,
    );
  }
}

/** Publishes the command; resolves with its durable result, or null when not waiting. */
export async function sendCommand(
  envelope: CommandEnvelope,
  { brokerUrl, wait, timeoutMs, userId }: SendOptions,
): Promise<CommandResult | null> {
  const connection = await openBroker(brokerUrl, "matchd-cli");
  try {
    const queue = commandQueue(envelope.partition);
    const channel = await connection.createConfirmChannel();
    // A failure closes the connection too, which fails the wait below.
    channel.on("error", () => undefined);
    // A mandatory command that no queue took is confirmed all the same: told apart by its return.
    const returned = new Promise<never>((_, reject) =>
      channel.on("return", () =>
        reject(
          new ClientError(`no queue took the command: is ${queue} bound to ${commandExchange}?`),
        ),
      ),
    );
    returned.catch(() => undefined);
    // A connection lost while waiting ends the wait at once, in one line.
    const lost = new Promise<never>((_, reject) =>
      connection.on("close", () =>
        reject(
          new ClientError(
            `the broker closed the connection before the result came; \`./matchd result ${envelope.commandId}\` tells whether the command was processed`,
          ),
        ),
      ),
    );
    lost.catch(() => undefined);
    await declareQueue(connection, channel, queue);
    const reply = wait ? await awaitReply(channel, envelope.commandId) : undefined;
    await new Promise<void>((resolve, reject) => {
      channel.publish(
        commandExchange,
        queue,
        Buffer.from(JSON.stringify(envelope)),
        {
          persistent: true,
          mandatory: true,
          contentType: "application/json",
          messageId: envelope.commandId,
          correlationId: envelope.commandId,
          replyTo: reply?.queue,
          ...(userId === undefined ? {} : { userId }),
        },
        (error) =>
          error ? reject(new ClientError(`the broker refused the command: ${error}`)) : resolve(),
      );
    });
    // The broker sends a return before the confirm: by now it has come, if it was one.
    await Promise.race([returned, Bun.sleep(0)]);
    if (reply === undefined) return null;
    const result = await Promise.race([reply.within(timeoutMs), returned, lost]);
    if (result !== undefined) return result;
    throw new ClientError(
      (await consumersOf(connection, queue)) === 0
        ? `no result within ${timeoutMs} ms: no conductor consumes ${queue} (start \`./matchd conductor --partition ${envelope.partition}\`); the command waits in the queue, \`./matchd result ${envelope.commandId}\` tells its outcome later`
        : `no result within ${timeoutMs} ms from the conductor of ${queue} (is its datastore down? see its /readyz); \`./matchd result ${envelope.commandId}\` tells the outcome later`,
    );
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/**
 * Declares the command exchange and queue as the conductor does, so a command sent before
 * the conductor first started waits in its queue rather than being unroutable. A queue that
 * exists with other arguments (a 406 closes the declaring channel) is used as it is.
 */
async function declareQueue(
  connection: ChannelModel,
  channel: Channel,
  queue: string,
): Promise<void> {
  await channel.assertExchange(commandExchange, "direct", { durable: true });
  const declaring = await connection.createChannel();
  declaring.on("error", () => undefined);
  try {
    await declaring.assertQueue(queue, { durable: true, arguments: commandQueueArguments });
    await declaring.bindQueue(queue, commandExchange, queue);
    await declaring.close();
  } catch {
    await consumersOf(connection, queue);
  }
}

/** How many consumers the queue has now (a conductor and its standbys). */
async function consumersOf(connection: ChannelModel, queue: string): Promise<number> {
  const check = await connection.createChannel();
  check.on("error", () => undefined);
  const { consumerCount } = await check.checkQueue(queue);
  await check.close();
  return consumerCount;
}

/** An exclusive reply queue, consumed before the command is sent. */
async function awaitReply(
  channel: Channel,
  commandId: string,
): Promise<{ queue: string; within(ms: number): Promise<CommandResult | undefined> }> {
  const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
  let settle: (result: CommandResult) => void = () => undefined;
  const replied = new Promise<CommandResult>((resolve) => {
    settle = resolve;
  });
  await channel.consume(
    queue,
    (message: ConsumeMessage | null) => {
      if (message === null || message.properties.correlationId !== commandId) return;
      try {
        settle(JSON.parse(message.content.toString("utf8")) as CommandResult);
      } catch {
        // Not a conductor's reply: keep waiting for the real one (or the timeout).
      }
    },
    { noAck: true },
  );
  return {
    queue,
    within: (ms) => Promise.race([replied, Bun.sleep(ms).then(() => undefined)]),
  };
}
