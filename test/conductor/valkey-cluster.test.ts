// A partition on a Valkey Cluster: the conductor connects to the primary that owns its hash
// tag's slot, waits for that shard's replica, and follows the slot when it is migrated to
// another primary under load, losing no command and applying none twice.

import { afterAll, expect, test } from "bun:test";
import Redis from "ioredis";
import type { CommandEnvelope } from "../../src/domain/index";
import { partitionKeys } from "../../src/infra/valkey/keys";
import { eventually } from "../support/eventually";
import { testStack, uniquePartition } from "../support/stack";
import { startValkeyCluster, type ValkeyCluster } from "../support/valkey-cluster";
import { disposeAll, Publisher, startConductor } from "./helpers";
import { OrderCommands } from "./order-commands";

let cluster: ValkeyCluster | undefined;

afterAll(async () => {
  await disposeAll();
  await cluster?.stop();
});

test("a partition's slot migrates to another primary under load; nothing is lost", async () => {
  const stack = await testStack();
  cluster = await startValkeyCluster("valkey-cluster");
  const partition = uniquePartition();
  const keys = partitionKeys(partition);
  const publisher = await Publisher.open(stack.brokerUrl);
  try {
    const conductor = await startConductor(stack, partition, { datastoreUrl: cluster.url });
    const orders = new OrderCommands(partition);
    const commands: CommandEnvelope[] = [];
    for (let i = 0; i < 400; i++) {
      commands.push(orders.place(`o${i}`, i % 2 === 0 ? "bid" : "ask", "100", "1"));
    }
    const processed = () => conductor.metric("matching_commands_processed_total");
    await publisher.publish(partition, commands.slice(0, 200));
    await eventually("the first half processed", async () => (await processed()) >= 200, 30_000);
    const before = await cluster.ownerOf(keys.ownerEpoch);
    // The second half goes in while the slot moves.
    const sending = (async () => {
      for (let i = 200; i < 400; i += 20) {
        await publisher.publish(partition, commands.slice(i, i + 20));
        await Bun.sleep(10);
      }
    })();
    const after = await cluster.migrateSlotOf(keys.ownerEpoch);
    await sending;
    expect(after).not.toBe(before);
    await eventually("every command processed", async () => (await processed()) >= 400, 60_000);
    // Every command's result is stored once, on the slot's new owner; the book is empty
    // (each ask filled its bid) and every event is in the stream, none twice.
    const owner = new Redis({ port: after, host: "127.0.0.1" });
    try {
      const results = await owner.mget(commands.map((c) => keys.processedCommand(c.commandId)));
      expect(results.filter((r) => r === null)).toHaveLength(0);
      expect(await owner.xlen(keys.events)).toBe(400 * 2);
      expect(await owner.zcard(keys.bookRates(partition, "bid"))).toBe(0);
    } finally {
      owner.disconnect();
    }
    expect(await processed()).toBe(400);
  } finally {
    await disposeAll();
    await publisher.deleteQueue(partition);
    await publisher.close();
  }
}, 180_000);
