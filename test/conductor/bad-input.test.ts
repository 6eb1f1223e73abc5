/**
 * Bad input of every kind: unreadable bodies go to the dead-letter queue with a reason;
 * parseable-but-invalid commands with a readable commandId get a stored rejected result
 * and an order.rejected.v1 event; superjson-wrapped commands are accepted. Nothing
 * crashes the conductor and every message is acknowledged.
 */
import { expect, test } from "bun:test";
import superjson from "superjson";
import { createWorkload } from "../../bench/workloads";
import type { PlaceOrderCommand } from "../../src/domain/index";
import { commandDeadLetterQueue } from "../../src/infra/amqp/topology";
import { uniquePartition } from "../support/stack";
import {
  conductorSuite,
  eventually,
  PartitionStore,
  partitionCount,
  removePartition,
  startConductor,
} from "./helpers";

const suite = conductorSuite();

test("malformed bodies: dead-lettered or rejected, all acknowledged, conductor keeps running", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const tag = `bad-${partition}-${Date.now()}`;
  try {
    const workload = createWorkload("alternating", { seed: 71, partition, partitionCount });
    const valid = (i: number, change: (c: PlaceOrderCommand) => void = () => {}) => {
      const command = structuredClone(workload.next(i)) as PlaceOrderCommand;
      command.commandId = `${tag}-${i}`;
      command.payload.id = `${tag}-order-${i}`;
      change(command);
      return command;
    };
    const unreadable: Record<string, string> = {
      "not-json": "{ this is not json",
      empty: "",
      array: "[1,2,3]",
      string: '"order.place"',
      null: "null",
      "no-command-id": JSON.stringify({
        schemaVersion: 1,
        type: "order.place",
        pairId: partition,
        partition,
      }),
      "numeric-command-id": JSON.stringify({ ...valid(50), commandId: 42 }),
      // 201 bytes in UTF-8: its events' ids could never be AMQP message ids.
      "command-id-over-200-bytes": JSON.stringify({ ...valid(51), commandId: "€".repeat(67) }),
      // Another version's command is not run, nor stored as a reject for the dedup window.
      "schema-version-2": JSON.stringify({ ...valid(52), schemaVersion: 2 }),
    };
    // What a producer set: a dead letter keeps it, to be replayed as it came.
    const producerProperties = {
      replyTo: `${tag}-nowhere`,
      type: "order.place",
      timestamp: 1_704_067_200_000,
      userId: "guest",
      appId: "bad-input-test",
    };
    const rejected: Record<string, { body: object; code: number }> = {
      precision: { body: valid(1, (c) => (c.payload.price = "100.123")), code: 203 },
      "negative-volume": {
        body: valid(2, (c) => {
          c.payload.volume = "-1";
          c.payload.volumeTotal = "-1";
        }),
        code: 204,
      },
      exponent: { body: valid(3, (c) => (c.payload.price = "1e2")), code: 202 },
      "unknown-type": { body: { ...valid(4), type: "order.replace" }, code: 201 },
      "wrong-partition-field": { body: valid(5, (c) => (c.partition = partition + 1)), code: 206 },
      "wrong-pair": {
        body: valid(6, (c) => {
          c.pairId = partition + 1;
          c.payload.pairId = partition + 1;
        }),
        code: 206,
      },
      "only-a-command-id": { body: { commandId: `${tag}-7` }, code: 200 },
      "volume-not-a-string": {
        body: { ...valid(8), payload: { ...valid(8).payload, volume: 1 } },
        code: 200,
      },
    };
    const accepted = {
      superjson: superjson.serialize(valid(20)),
      // With meta: a Date in an extension field survives the round trip.
      "superjson-with-meta": superjson.serialize({
        ...valid(22),
        payload: { ...valid(22).payload, placedAt: new Date(1_704_067_200_000) },
      }),
    };

    const conductor = await startConductor(suite.stack, partition);
    for (const [name, body] of Object.entries(unreadable)) {
      await suite.publisher.publish(partition, [body], {
        messageId: `${tag}-${name}`,
        ...producerProperties,
      });
    }
    for (const [name, { body }] of Object.entries(rejected)) {
      await suite.publisher.publish(partition, [body], { messageId: `${tag}-${name}` });
    }
    for (const [name, body] of Object.entries(accepted)) {
      await suite.publisher.publish(partition, [JSON.stringify(body)], {
        messageId: `${tag}-${name}`,
      });
    }
    const total =
      Object.keys(unreadable).length + Object.keys(rejected).length + Object.keys(accepted).length;
    // A dead-lettered message also reached its final outcome: the processed counter includes it.
    await eventually(
      "every message settled",
      async () => (await conductor.metric("matching_commands_processed_total")) === total,
      15_000,
      async () => JSON.stringify(await conductor.metrics()),
    );
    expect(conductor.process.exitCode).toBeNull();
    expect(await conductor.metric("matching_commands_dead_letter_total")).toBe(
      Object.keys(unreadable).length,
    );
    expect(await conductor.metric("matching_command_failures_total")).toBe(0);

    // Rejected: a stored result with the code, and one order.rejected.v1 event each.
    const events = (await store.events()).map((e) => e.event);
    for (const [name, { body, code }] of Object.entries(rejected)) {
      const commandId = (body as { commandId: string }).commandId;
      const stored = await store.storedResults([commandId]);
      expect({ name, result: stored.get(commandId) }).toMatchObject({
        name,
        result: { status: "rejected", code },
      });
      const own = events.filter((e) => e.commandId === commandId);
      expect({ name, types: own.map((e) => e.type) }).toEqual({
        name,
        types: ["order.rejected.v1"],
      });
      expect(own[0]!.payload).toMatchObject({ code });
    }
    for (const body of Object.values(accepted)) {
      const commandId = (body.json as { commandId: string }).commandId;
      expect((await store.storedResults([commandId])).get(commandId)).toMatchObject({
        status: "accepted",
      });
    }
    // Two accepted bids rest; nothing else touched the book.
    expect(await store.bookSizes(partition)).toEqual({ bids: 2, asks: 0 });
    expect(events.length).toBe(Object.keys(rejected).length + 2);

    // Unreadable: on the dead-letter queue with the reason in a header.
    const channel = await suite.publisher.channelModel().createChannel();
    try {
      const reasons = new Map<string, string>();
      for (let i = 0; i < 10_000 && reasons.size < Object.keys(unreadable).length; i++) {
        const message = await channel.get(commandDeadLetterQueue, { noAck: false });
        if (message === false) break;
        const id = String(message.properties.messageId);
        if (id.startsWith(`${tag}-`)) {
          const name = id.slice(tag.length + 1);
          reasons.set(name, String(message.properties.headers?.["x-dead-letter-reason"]));
          expect({ name, content: message.content.toString() }).toEqual({
            name,
            content: unreadable[name]!,
          });
          const { userId, ...kept } = producerProperties;
          expect(message.properties).toMatchObject(kept);
          expect(message.properties.headers?.["x-original-user-id"]).toBe(userId);
          channel.ack(message);
        }
        // Other tests' dead letters stay unacknowledged and return to the queue on close.
      }
      expect([...reasons.keys()].sort()).toEqual(Object.keys(unreadable).sort());
      for (const reason of reasons.values()) expect(reason.length).toBeGreaterThan(5);
      expect(reasons.get("not-json")).toContain("not JSON");
      expect(reasons.get("schema-version-2")).toContain("schemaVersion 2");
      const v2 = valid(52).commandId;
      expect((await store.storedResults([v2])).size).toBe(0);
    } finally {
      await channel.close().catch(() => undefined);
    }

    expect(await conductor.stop()).toBe(0);
    expect(await suite.publisher.messageCount(partition)).toBe(0);
  } finally {
    await removePartition(store, suite.publisher, partition);
  }
}, 60_000);
