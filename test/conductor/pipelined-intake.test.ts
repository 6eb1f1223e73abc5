/**
 * A command that arrives while the oldest batch waits for its durability is committed at
 * once, in the pipeline's second place, rather than after that wait: with the replica paused
 * (SIGSTOP, a private pair) the first command's batch cannot become durable, and the second
 * command's result is in Valkey all the same; both are acknowledged, in order, once the
 * replica resumes.
 */
import { afterAll, expect, test } from "bun:test";
import amqp from "amqplib";
import type { RunningValkey } from "../../src/stack/index";
import { stackStartTimeoutMs, testStack, uniquePartition } from "../support/stack";
import { startValkeyPair } from "../support/valkey-pair";
import {
  alternatingRpcCommands,
  disposeAll,
  eventually,
  openReplies,
  PartitionStore,
  Publisher,
  startConductor,
} from "./helpers";

const servers: RunningValkey[] = [];
afterAll(async () => {
  await disposeAll();
  for (const server of servers) await server.stop().catch(() => undefined);
});

test(
  "a command arriving during the oldest batch's durability wait is committed during it",
  async () => {
    const stack = await testStack();
    const pair = await startValkeyPair("matchd-pipelined-intake-");
    servers.push(pair.primary, pair.replica);
    const partition = uniquePartition();
    const store = new PartitionStore(pair.primary.url, partition);
    const publisher = await Publisher.open(stack.brokerUrl);
    const rpc = await amqp.connect(stack.brokerUrl);
    const { queue, replies, close } = await openReplies(rpc);
    let paused = false;
    try {
      const conductor = await startConductor(stack, partition, {
        datastoreUrl: pair.primary.url,
        extraArgs: ["--durability-timeout-ms", "60000"],
      });
      const { commands, publish } = alternatingRpcCommands(publisher, partition, 61, 2, queue);
      process.kill(pair.replica.pid, "SIGSTOP");
      paused = true;
      await publish(0, 1);
      await eventually(
        "the first command committed",
        async () => (await store.storedResults([commands[0]!.commandId])).size === 1,
      );
      await publish(1, 2);
      await eventually(
        "the second command committed while the first waits for its durability",
        async () => (await store.storedResults([commands[1]!.commandId])).size === 1,
        10_000,
      );
      expect(replies.size).toBe(0);
      process.kill(pair.replica.pid, "SIGCONT");
      paused = false;
      await eventually("both replied", () => replies.size === 2, 30_000);
      expect(replies.get(commands[0]!.commandId)).toMatchObject({
        status: "accepted",
        codeName: "rested",
      });
      expect(replies.get(commands[1]!.commandId)).toMatchObject({
        status: "accepted",
        codeName: "filled",
      });
      expect(await conductor.stop()).toBe(0);
    } finally {
      if (paused) process.kill(pair.replica.pid, "SIGCONT");
      await close();
      await rpc.close().catch(() => undefined);
      await publisher.deleteQueue(partition);
      await publisher.close();
      store.close();
    }
  },
  stackStartTimeoutMs,
);
