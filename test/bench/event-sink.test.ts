// The event benches' sink against the test stack's RabbitMQ: it counts each event of its run
// once, and tells repeats and other runs' messages apart.

import { expect, test } from "bun:test";
import amqp from "amqplib";
import { EventSink } from "../../src/bench/event-sink";
import { eventExchanges } from "../../src/infra/amqp/topology";
import { eventually } from "../support/eventually";
import { testStack } from "../support/stack";

test("the sink counts this run's events once, and notes duplicates and foreign messages", async () => {
  const { brokerUrl } = await testStack();
  const connection = await amqp.connect(brokerUrl);
  try {
    const runId = `sink-test-${Date.now().toString(36)}`;
    const sink = await EventSink.open(brokerUrl, runId, 10);
    const publisher = await connection.createConfirmChannel();
    const exchange = eventExchanges["order.filled.v1"];
    const ids = [
      `${runId}-0:0:order.filled.v1`,
      `${runId}-0:1:order.filled.v1`,
      `${runId}-0:0:order.filled.v1`, // a repeat
      `${runId}-99:0:order.filled.v1`, // beyond the run's command range, still counted once
      `${runId}-99:0:order.filled.v1`, // and its repeat
      `other-run-0:0:order.filled.v1`,
    ];
    for (const messageId of ids) {
      publisher.publish(exchange, exchange, Buffer.from("{}"), { messageId });
    }
    await publisher.waitForConfirms();
    await eventually(
      "every published message at the sink",
      () => sink.received + sink.duplicates + sink.foreign === ids.length,
    );
    expect(sink.received).toBe(3);
    expect(sink.duplicates).toBe(2);
    expect(sink.foreign).toBe(1);
    expect(sink.lastReceivedAt).toBeGreaterThanOrEqual(sink.firstReceivedAt);
    expect(sink.firstReceivedAt).toBeGreaterThan(0);
    await sink.close();
  } finally {
    await connection.close().catch(() => undefined);
  }
}, 30_000);
