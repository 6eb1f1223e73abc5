/**
 * The examples against the real stack: the producer's retry reuses its command id, so the
 * order it sends twice is placed once; the consumer's inbox applies a republished event once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import amqp from "amqplib";
import Redis from "ioredis";
import { commandQueue } from "../../src/infra/amqp/topology";
import { disposeAll, eventually, startConductor } from "../conductor/helpers";
import { startFeed } from "../feed/helpers";
import { startOutbox } from "../outbox/helpers";
import {
  matchdCommand,
  stackStartTimeoutMs,
  type TestStack,
  testStack,
  uniquePartition,
} from "../support/stack";

const bun = join(import.meta.dir, "../../node_modules/.bin/bun");
const examples = join(import.meta.dir, "../../examples");
let stack: TestStack;

beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);
afterAll(disposeAll);

function spawnExample(file: string, args: string[], env: Record<string, string>) {
  const child = Bun.spawn([bun, join(examples, file), ...args], {
    env: { PATH: process.env.PATH, MATCHING_BROKER_URL: stack.brokerUrl, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = { stdout: "", stderr: "" };
  for (const stream of ["stdout", "stderr"] as const) {
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of child[stream]) output[stream] += decoder.decode(chunk);
    })();
  }
  return { child, output };
}

describe("examples", () => {
  test("producer: a retry with the same command id places the order once", async () => {
    const pair = uniquePartition();
    const producer = spawnExample("producer.ts", [String(pair), "bid", "100", "1"], {
      MATCHING_PARTITION_COUNT: "1024",
      EXAMPLE_ATTEMPT_TIMEOUT_MS: "1000",
    });
    // No conductor yet: the first attempt goes unanswered and is sent again.
    await eventually("a resend", () => producer.output.stderr.includes("attempt 2:"), 20_000);
    const conductor = await startConductor(stack, pair);
    expect(await producer.child.exited).toBe(0);
    const { attempt, result } = JSON.parse(producer.output.stdout);
    expect(attempt).toBeGreaterThanOrEqual(3);
    expect(result).toMatchObject({ codeName: "rested", remainingVolume: "1" });
    // Every copy in the queue ran: the first placed the order, the others found its result.
    await eventually("the queue drained", async () => {
      const book = (await (await fetch(`${conductor.url}/books/${pair}`)).json()) as {
        bids: { volume: string; orders: number }[];
      };
      return (
        JSON.stringify(book.bids) === JSON.stringify([{ price: "100", volume: "1", orders: 1 }])
      );
    });
    await eventually(
      "every copy answered",
      async () =>
        (await conductor.metric("matching_commands_processed_total")) +
          (await conductor.metric("matching_commands_duplicate_total")) ===
        attempt,
    );
    expect(await conductor.metric("matching_commands_accepted_total")).toBe(1);
    expect(await conductor.metric("matching_commands_duplicate_total")).toBe(attempt - 1);
    await conductor.stop();
    const connection = await amqp.connect(stack.brokerUrl);
    await (await connection.createChannel()).deleteQueue(commandQueue(pair));
    await connection.close();
  }, 60_000);

  test("consumer: a republished event is applied once", async () => {
    const queue = `example.consumer.${uniquePartition()}`;
    const consumer = spawnExample("consumer.ts", [], {
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      EXAMPLE_QUEUE: queue,
    });
    const connection = await amqp.connect(stack.brokerUrl);
    const valkey = new Redis(stack.datastoreUrl);
    try {
      const channel = await connection.createConfirmChannel();
      await eventually("the consumer's queue", async () => {
        const check = await connection.createChannel();
        check.on("error", () => undefined);
        const consumers = await check.checkQueue(queue).then(
          (q) => q.consumerCount,
          () => 0,
        );
        await check.close().catch(() => undefined);
        return consumers === 1;
      });
      const exchange = "messages:order:create";
      for (const eventId of [
        "c-1:0:order.rested.v1",
        "c-1:0:order.rested.v1",
        "c-2:0:order.rested.v1",
      ]) {
        const envelope = { schemaVersion: 1, eventId, type: "order.rested.v1", payload: {} };
        channel.publish(exchange, exchange, Buffer.from(JSON.stringify(envelope)), {
          persistent: true,
          messageId: eventId,
        });
      }
      await channel.waitForConfirms();
      await eventually("three deliveries", () => consumer.output.stdout.split("\n").length > 3);
      expect(consumer.output.stdout.trim().split("\n")).toEqual([
        "applied c-1:0:order.rested.v1 order.rested.v1",
        "duplicate c-1:0:order.rested.v1 order.rested.v1",
        "applied c-2:0:order.rested.v1 order.rested.v1",
      ]);
      expect(await valkey.hget(`${queue}:counts`, "order.rested.v1")).toBe("2");
      consumer.child.kill("SIGTERM");
      expect(await consumer.child.exited).toBe(0);
      await channel.deleteQueue(queue);
    } finally {
      consumer.child.kill("SIGKILL");
      const keys = await valkey.keys(`${queue}:*`);
      if (keys.length > 0) await valkey.del(...keys);
      valkey.disconnect();
      await connection.close();
    }
  }, 60_000);

  test("feed client: keeps a pair's book and verifies every message's checksum", async () => {
    const pair = uniquePartition();
    const conductor = await startConductor(stack, pair);
    const outbox = await startOutbox(stack, pair);
    const feed = await startFeed(stack, pair);
    try {
      const { child, output } = spawnExample(
        "feed-client.ts",
        [String(pair), feed.wsUrl, "--count", "3"],
        {},
      );
      await eventually("the snapshot verified", () => output.stdout.includes("verified"));
      for (const [side, price] of [
        ["bid", "100"],
        ["ask", "100.5"],
      ]) {
        const run = Bun.spawnSync(
          [
            ...matchdCommand,
            "order",
            "place",
            "--pair",
            String(pair),
            "--side",
            side!,
            "--price",
            price!,
            "--volume",
            "1",
          ],
          {
            env: {
              PATH: process.env.PATH,
              MATCHING_BROKER_URL: stack.brokerUrl,
              MATCHING_PARTITION_COUNT: "1024",
            },
          },
        );
        expect(run.exitCode).toBe(0);
      }
      expect(await child.exited).toBe(0);
      expect(output.stdout).not.toContain("mismatch");
      expect(output.stdout).not.toContain("gap");
      expect(output.stdout).toContain(`verified: bid 1 @ 100, ask 1 @ 100.5`);
    } finally {
      await feed.dispose();
      await outbox.stop();
      await conductor.dispose();
    }
  }, 60_000);
});
