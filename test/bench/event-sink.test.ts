// The event benches' sink against the test stack's RabbitMQ: it counts each event of its run
// once, and tells repeats and other runs' messages apart.

import { expect, test } from "bun:test";
import amqp from "amqplib";
import { EventSink } from "../../bench/event-sink";
import { eventExchanges } from "../../src/infra/amqp/topology";
import { eventually } from "../support/eventually";
import { testStack } from "../support/stack";

test("the sink counts this run's events once, and notes duplicates and foreign messages", async () => {
  const { brokerUrl } = await testStack();
  const connection = await amqp.connect(brokerUrl);
  let sink: EventSink | undefined;
  try {
    const runId = `sink-test-${Date.now().toString(36)}`;
    const opened = await EventSink.open(brokerUrl, runId, 10);
    sink = opened;
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
      () => opened.received + opened.duplicates + opened.foreign === ids.length,
    );
    expect(opened.received).toBe(3);
    expect(opened.duplicates).toBe(2);
    expect(opened.foreign).toBe(1);
    expect(opened.lastReceivedAt).toBeGreaterThanOrEqual(opened.firstReceivedAt);
    expect(opened.firstReceivedAt).toBeGreaterThan(0);
  } finally {
    await sink?.close();
    await connection.close().catch(() => undefined);
  }
}, 30_000);

test("a deferred sink's queue holds the run's events until it starts receiving", async () => {
  const { brokerUrl } = await testStack();
  const connection = await amqp.connect(brokerUrl);
  let sink: EventSink | undefined;
  try {
    const runId = `deferred-sink-test-${Date.now().toString(36)}`;
    const opened = await EventSink.open(brokerUrl, runId, 10, { deferred: true });
    sink = opened;
    const publisher = await connection.createConfirmChannel();
    const exchange = eventExchanges["deal.executed.v1"];
    for (let command = 0; command < 3; command++) {
      const messageId = `${runId}-${command}:2:deal.executed.v1`;
      publisher.publish(exchange, exchange, Buffer.from("{}"), { messageId });
    }
    await publisher.waitForConfirms();
    // Confirmed means routed to the queue: all three wait there, none received yet.
    await eventually(
      "three messages in the sink's queue",
      async () => (await opened.queued()) === 3,
    );
    expect(opened.received).toBe(0);
    await opened.startReceiving();
    await eventually("the three received", () => opened.received === 3);
    expect(await opened.queued()).toBe(0);
    expect(opened.duplicates).toBe(0);
  } finally {
    await sink?.close();
    await connection.close().catch(() => undefined);
  }
}, 30_000);
