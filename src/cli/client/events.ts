/**
 * `matchd events`: an exclusive queue of its own (gone with its connection) bound to every
 * event exchange, printing each event as it arrives; without --follow it ends once no event
 * came for a while, with --follow at SIGINT or SIGTERM.
 */
import type { ConsumeMessage } from "amqplib";
import type { EventEnvelope } from "../../domain/index";
import { allEventExchanges, declareEventExchanges } from "../../infra/amqp/topology";
import { ExitCode } from "../../infra/exit-codes";
import { eventLine } from "./format";
import { openBroker } from "./rpc";

/** Without --follow: the quiet time after which the events so far are taken as all. */
export const eventsIdleMs = 2000;

export interface EventsOptions {
  brokerUrl: string;
  follow: boolean;
  pairId?: number;
  json: boolean;
  print: (line: string) => void;
  /** Resolves when the command should stop (a signal). */
  stopped: Promise<unknown>;
}

export async function followEvents(options: EventsOptions): Promise<number> {
  const connection = await openBroker(options.brokerUrl, "matchd-cli-events");
  let lastEventAt = performance.now();
  let lost: Error | undefined;
  const closed = new Promise<void>((resolve) =>
    connection.on("close", (error?: Error) => {
      lost = error;
      resolve();
    }),
  );
  try {
    const channel = await connection.createChannel();
    await declareEventExchanges(channel);
    const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
    for (const exchange of allEventExchanges) await channel.bindQueue(queue, exchange, exchange);
    await channel.consume(
      queue,
      (message: ConsumeMessage | null) => {
        if (message === null) return;
        lastEventAt = performance.now();
        const line = render(message, options);
        if (line !== null) options.print(line);
      },
      { noAck: true },
    );
    const idle = async () => {
      while (performance.now() - lastEventAt < eventsIdleMs) await Bun.sleep(100);
    };
    await Promise.race([options.stopped, closed, ...(options.follow ? [] : [idle()])]);
  } finally {
    await connection.close().catch(() => undefined);
  }
  if (lost !== undefined) {
    process.stderr.write(`matchd: the broker closed the connection: ${lost.message}\n`);
    return ExitCode.failure;
  }
  return ExitCode.ok;
}

function render(message: ConsumeMessage, options: EventsOptions): string | null {
  const text = message.content.toString("utf8");
  let event: EventEnvelope;
  try {
    event = JSON.parse(text) as EventEnvelope;
  } catch {
    return `- unreadable event on ${message.fields.exchange}: ${text.slice(0, 200)}`;
  }
  if (options.pairId !== undefined && event.pairId !== options.pairId) return null;
  if (options.json) return text;
  const offset = message.properties.headers?.["x-partition-offset"] as string | undefined;
  return eventLine(event, offset);
}
