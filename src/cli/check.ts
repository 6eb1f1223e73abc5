/**
 * `matchd check`: the durability policy's datastore checks plus broker reachability,
 * each printed as pass/fail; starts nothing.
 */

import type { Config } from "../config/schema";
import { BrokerRefusedError } from "../infra/amqp/broker-errors";
import { brokerUrls } from "../infra/amqp/broker-urls";
import { connectBroker } from "../infra/amqp/connect";
import { runDatastoreChecks } from "../infra/boot";
import { redactUrl } from "../infra/redact";
import type { CheckOutcome } from "../infra/valkey/durability";
import { withinMs } from "../infra/within";

export async function runCheck(config: Config, print: (line: string) => void): Promise<number> {
  const outcomes = await runDatastoreChecks(config, { dedupSizing: true });
  outcomes.push(...(await checkBrokerNodes(config.brokerUrl)));
  print(`policy: MATCHING_DURABILITY=${config.durability}`);
  for (const outcome of outcomes) {
    const verdict = !outcome.ok ? "FAIL" : outcome.warning === true ? "WARN" : "PASS";
    print(`${verdict} ${outcome.name}: ${outcome.detail}`);
  }
  return outcomes.every((o) => o.ok) ? 0 : 3;
}

/** How long opening the channel may take: a broker that accepts TCP and then stalls must not hang the check. */
const channelTimeoutMs = 5000;

/**
 * Each node of the broker setting on its own: with a cluster, one node down is a warning (the
 * services move to another), all of them down a failure.
 */
async function checkBrokerNodes(setting: string): Promise<CheckOutcome[]> {
  const urls = brokerUrls(setting);
  const outcomes = await Promise.all(urls.map((url) => checkBroker(url)));
  if (urls.length === 1) return outcomes;
  const anyUp = outcomes.some((o) => o.ok);
  return outcomes.map((o, i) => ({
    ...o,
    name: `${o.name} (node ${i + 1} of ${urls.length}, ${redactUrl(urls[i]!)})`,
    ...(anyUp && !o.ok && o.name === "broker reachable" ? { ok: true, warning: true } : {}),
  }));
}

async function checkBroker(url: string): Promise<CheckOutcome> {
  try {
    const connection = await connectBroker(url, "matchd-check");
    // amqplib throws an unheard 'error' (a fatal close, a socket reset): a crash, not a FAIL.
    connection.on("error", () => undefined);
    try {
      const opened = await withinMs(
        connection
          .createChannel()
          .then((channel) => channel.close())
          .then(() => true),
        channelTimeoutMs,
      );
      if (opened === undefined) throw new Error(`no channel within ${channelTimeoutMs} ms`);
    } finally {
      await withinMs(
        connection.close().catch(() => undefined),
        channelTimeoutMs,
      );
    }
    return { name: "broker reachable", ok: true, detail: "AMQP channel opened" };
  } catch (error) {
    if (error instanceof BrokerRefusedError) {
      return { name: "broker accepts user and vhost", ok: false, detail: error.message };
    }
    return {
      name: "broker reachable",
      ok: false,
      detail: `cannot open an AMQP channel (${(error as Error).message}); start RabbitMQ or fix MATCHING_BROKER_URL`,
    };
  }
}
