/**
 * The dead-letter script on the real datastore, run twice for one entry as ioredis does when
 * a dropped connection lost the first reply: the entry reaches the dead letter once.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { outboxConsumerGroup, partitionKeys } from "../../src/infra/valkey/keys";
import { runScript } from "../../src/infra/valkey/lua-script";
import { deadLetterScript } from "../../src/outbox/scripts";
import { stackStartTimeoutMs, testStack, uniquePartition } from "../support/stack";
import { deletePartitionKeys } from "./helpers";

let valkey: Redis;
beforeAll(async () => {
  valkey = new Redis((await testStack()).datastoreUrl);
}, stackStartTimeoutMs);
afterAll(() => valkey?.disconnect());

test("a second run for an entry already moved adds nothing to the dead letter", async () => {
  const partition = uniquePartition();
  const keys = partitionKeys(partition);
  try {
    const id = (await valkey.xadd(keys.events, "*", "event", "{not json")) as string;
    await valkey.xgroup("CREATE", keys.events, outboxConsumerGroup, "0");
    await valkey.xreadgroup("GROUP", outboxConsumerGroup, "c1", "STREAMS", keys.events, ">");
    const args = [outboxConsumerGroup, id, "event", "{not json", "reason", "bad", "source-id", id];
    const run = () =>
      runScript(valkey, deadLetterScript, [keys.events, keys.eventsDeadLetter], args);
    expect(typeof (await run())).toBe("string");
    expect(await run()).toBeNull();
    expect(await valkey.xlen(keys.eventsDeadLetter)).toBe(1);
    expect(await valkey.xlen(keys.events)).toBe(0);
    const pending = (await valkey.xpending(keys.events, outboxConsumerGroup)) as [number];
    expect(pending[0]).toBe(0);
  } finally {
    await deletePartitionKeys(valkey, partition);
  }
});
