/**
 * The conductor's limit on requests at once: with the replica paused (a private pair) every
 * stored-result query waits to show its result durable, so 64 are in flight; the 65th is
 * refused with 503 at once, the probes still answer, and the 64 complete once it resumes.
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
  Publisher,
  startConductor,
} from "./helpers";

const servers: RunningValkey[] = [];
afterAll(async () => {
  await disposeAll();
  for (const server of servers) await server.stop().catch(() => undefined);
});

test(
  "past 64 requests at once the next is refused with 503, while the probes still answer",
  async () => {
    const stack = await testStack();
    const pair = await startValkeyPair("matchd-http-limit-");
    servers.push(pair.primary, pair.replica);
    const partition = uniquePartition();
    const publisher = await Publisher.open(stack.brokerUrl);
    const rpc = await amqp.connect(stack.brokerUrl);
    const { queue, replies, close } = await openReplies(rpc);
    let paused = false;
    try {
      const conductor = await startConductor(stack, partition, {
        datastoreUrl: pair.primary.url,
        extraArgs: ["--durability-timeout-ms", "30000"],
      });
      const { commands, publish } = alternatingRpcCommands(publisher, partition, 62, 1, queue);
      await publish(0, 1);
      await eventually("the command replied", () => replies.size === 1);
      // With the replica paused, a stored result cannot be shown durable: each query waits.
      process.kill(pair.replica.pid, "SIGSTOP");
      paused = true;
      const url = `${conductor.url}/commands/${commands[0]!.commandId}`;
      const waiting = Array.from({ length: 64 }, () => fetch(url).then((r) => r.status));
      await Bun.sleep(1000);
      const refused = await fetch(url);
      expect(refused.status).toBe(503);
      expect(await refused.json()).toEqual({ error: "too many concurrent requests" });
      expect((await fetch(`${conductor.url}/healthz`)).status).toBe(200);
      process.kill(pair.replica.pid, "SIGCONT");
      paused = false;
      expect(await Promise.all(waiting)).toEqual(new Array(64).fill(200));
      expect((await fetch(url)).status).toBe(200);
      expect(await conductor.stop()).toBe(0);
    } finally {
      if (paused) process.kill(pair.replica.pid, "SIGCONT");
      await close();
      await rpc.close().catch(() => undefined);
      await publisher.deleteQueue(partition);
      await publisher.close();
    }
  },
  stackStartTimeoutMs,
);
