/**
 * Command size and shape: a message larger than MATCHING_COMMAND_MAX_BYTES (up to the largest
 * the stack's broker accepts) and a 100,000-level nested one are dead-lettered with their
 * reason and never decoded, a body nested deeper than the decoder allows too, and the valid
 * commands behind them go through; the largest valid command fits the default with room to
 * spare; a 100 MiB message never gets past the broker.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import amqp, { type GetMessage } from "amqplib";
import { createWorkload } from "../../bench/workloads";
import { MAX_COMMAND_ID_BYTES } from "../../src/domain/decode-command-fast";
import { decodeCommand, MatchingEngine } from "../../src/domain/index";
import { decodeBody } from "../../src/infra/amqp/codec";
import { commandDeadLetterQueue } from "../../src/infra/amqp/topology";
import { brokerMaxMessageBytes } from "../../src/stack/rabbitmq";
import { uniquePartition } from "../support/stack";
import {
  conductorSuite,
  eventually,
  PartitionStore,
  removePartition,
  startConductor,
} from "./helpers";

const suite = conductorSuite();
const defaultMaxBytes = 8192;

/** Resident and peak resident memory of a process, in MiB. */
function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]);
  return { rss: kib("VmRSS") / 1024, peak: kib("VmHWM") / 1024 };
}

test("the largest valid command fits the default limit with room to spare", () => {
  const [command] = createWorkload("alternating", { partition: 1, partitionCount: 2 })
    .prefill()
    .concat(createWorkload("alternating", { partition: 1, partitionCount: 2 }).next(0));
  const id = "é".repeat(200); // 400 bytes in UTF-8: ids are limited in characters
  const largest = {
    ...command!,
    commandId: "c".repeat(MAX_COMMAND_ID_BYTES),
    correlationId: id,
    payload: {
      ...(command!.payload as object),
      id,
      userId: id,
      timeInForce: "fok",
      postOnly: true,
      stp: "cancel-both",
      price: "1".repeat(18),
      volume: "1".repeat(18),
      volumeTotal: "1".repeat(18),
      quoteVolume: "1".repeat(18),
    },
  };
  // superjson's wrapper, as some producers send it, adds a few bytes more.
  const bytes = Buffer.byteLength(JSON.stringify({ json: largest, meta: { values: {} } }));
  console.log(`largest valid command: ${bytes} bytes; default limit ${defaultMaxBytes}`);
  expect(bytes).toBeLessThan(defaultMaxBytes - 4096);
  // And it is a command: it decodes, and the engine reads it (refusing its decimals on
  // magnitude, not its shape).
  const body = decodeBody(Buffer.from(JSON.stringify({ json: largest, meta: { values: {} } })));
  expect(body.ok).toBe(true);
  const decoded = decodeCommand(body.ok ? body.value : undefined);
  expect(decoded.ok).toBe(true);
  if (!decoded.ok) return;
  expect(new MatchingEngine().apply(decoded.command).result.codeName).toBe("magnitude-exceeded");
});

test("oversized and deeply nested messages are dead-lettered undecoded; the rest goes on", async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  const workload = createWorkload("alternating", {
    partition,
    partitionCount: 1024,
    seed: partition,
  });
  const tag = `limits-${partition}`;
  try {
    const conductor = await startConductor(suite.stack, partition);
    const pid = conductor.process.pid;
    const before = memoryMiB(pid);
    const command = workload.next(0);
    const unreadable: Record<string, string> = {
      "over-limit": JSON.stringify({ ...command, padding: "x".repeat(defaultMaxBytes) }),
      "nested-100000": `${"[".repeat(100_000)}${"]".repeat(100_000)}`,
      "nested-20": `{"a":${"[".repeat(20)}${"]".repeat(20)}}`,
      // Just below what the stack's broker accepts: the largest a conductor can be sent.
      "broker-max": "x".repeat(brokerMaxMessageBytes - 4096),
    };
    const valid = [workload.next(0), workload.next(1), workload.next(2), workload.next(3)];
    const names = Object.keys(unreadable);
    for (let i = 0; i < names.length; i++) {
      await suite.publisher.publish(partition, [unreadable[names[i]!]!], {
        messageId: `${tag}-${names[i]}`,
      });
      await suite.publisher.publish(partition, [valid[i]!]);
    }
    await eventually(
      "every valid command stored",
      async () => {
        const stored = await store.storedResults(valid.map((c) => c.commandId));
        return stored.size === valid.length;
      },
      60_000,
    );
    // Counted once the dead letters are confirmed, after their batch's commit.
    await eventually(
      "every dead letter counted",
      async () => (await conductor.metric("matching_commands_dead_letter_total")) === names.length,
    );
    const after = memoryMiB(pid);
    console.log(
      `conductor memory: ${before.rss.toFixed(0)} MiB before, ${after.rss.toFixed(0)} MiB after, peak ${after.peak.toFixed(0)} MiB (a ${(brokerMaxMessageBytes / 1048576).toFixed(0)} MiB message was received and dead-lettered whole)`,
    );

    const channel = await suite.publisher.channelModel().createChannel();
    const reasons = new Map<string, { reason: string; bytes: number }>();
    try {
      for (let i = 0; i < 10_000 && reasons.size < names.length; i++) {
        const message: GetMessage | false = await channel.get(commandDeadLetterQueue, {
          noAck: false,
        });
        if (message === false) {
          await Bun.sleep(50);
          continue;
        }
        const id = String(message.properties.messageId);
        if (id.startsWith(`${tag}-`)) {
          reasons.set(id.slice(tag.length + 1), {
            reason: String(message.properties.headers?.["x-dead-letter-reason"]),
            bytes: message.content.length,
          });
          channel.ack(message);
        } else channel.nack(message, false, true);
      }
    } finally {
      await channel.close().catch(() => undefined);
    }
    const tooLarge = (bytes: number) =>
      `message of ${bytes} bytes is larger than MATCHING_COMMAND_MAX_BYTES (${defaultMaxBytes}); not decoded`;
    expect(reasons.get("over-limit")?.reason).toBe(
      tooLarge(Buffer.byteLength(unreadable["over-limit"]!)),
    );
    expect(reasons.get("nested-100000")?.reason).toBe(tooLarge(200_000));
    expect(reasons.get("broker-max")).toEqual({
      reason: tooLarge(brokerMaxMessageBytes - 4096),
      bytes: brokerMaxMessageBytes - 4096,
    });
    expect(reasons.get("nested-20")?.reason).toBe("body nests deeper than 16 levels; not decoded");
    expect(await conductor.stop()).toBe(0);
  } finally {
    await removePartition(store, suite.publisher, partition);
  }
}, 120_000);

test("the stack's broker refuses a 100 MiB message at publish: no consumer is sent one", async () => {
  const partition = uniquePartition();
  const connection = await amqp.connect(suite.stack.brokerUrl);
  try {
    const channel = await connection.createConfirmChannel();
    const closed = new Promise<Error>((resolve) => channel.on("error", resolve));
    channel.publish(
      "matching:commands",
      `matching:commands.p${partition}`,
      Buffer.alloc(100 * 1024 * 1024),
    );
    const error = await closed;
    expect(error.message).toContain("PRECONDITION_FAILED");
    expect(error.message).toContain("larger than configured max size");
  } finally {
    await connection.close().catch(() => undefined);
  }
}, 60_000);
