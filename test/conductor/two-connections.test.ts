/**
 * The conductor's commits alternate between two connections (a WAITAOF blocks its own), and
 * each commit's durability wait goes on the connection that wrote it. A failover may leave
 * the two on different nodes for a while: a commit on a node that lacks the one before it is
 * refused (DIVERGED) and writes nothing there.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { CommitBuilder } from "../../src/conductor/commit-script";
import { ConductorStore, DivergedError } from "../../src/conductor/store";
import { createValkey, type Valkey } from "../../src/infra/valkey/client";
import { type PartitionKeys, partitionKeys } from "../../src/infra/valkey/keys";
import { type RunningValkey, startValkey } from "../../src/stack/index";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { tempDir } from "../support/temp-dir";
import { PartitionStore } from "./helpers";

let stack: TestStack;
const opened: Valkey[] = [];

beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);

afterAll(() => {
  for (const valkey of opened) valkey.disconnect();
});

/** A connection, ready: a wait's connection check counts from the first 'ready'. */
async function connect(url: string, name: string): Promise<Valkey> {
  const valkey = createValkey(url, { name });
  // A server a test stops leaves its client reconnecting: not this test's failure.
  valkey.on("error", () => undefined);
  opened.push(valkey);
  await valkey.ping();
  return valkey;
}

/**
 * Command n's result marker and one event, built on the count the store says the next commit
 * builds on (a marker that exists already makes the script skip the commit as a resend).
 */
function stage(store: ConductorStore, keys: PartitionKeys, epoch: number, n: number) {
  const batch = new CommitBuilder(keys.ownerEpoch, epoch, keys.eventSequence, store.chainFor());
  batch.setWithTtl(keys.processedCommand(`c${n}`), "{}", 60);
  batch.xadd(keys.events, '{"type":"test.v1"}');
  return batch;
}

test("commits alternate between the two connections; each waits on its own", async () => {
  const partition = uniquePartition();
  const data = new PartitionStore(stack.datastoreUrl, partition);
  const writer = await connect(stack.datastoreUrl, "two-connections-writer");
  const committer = await connect(stack.datastoreUrl, "two-connections-committer");
  const store = new ConductorStore(writer, data.keys, writer, writer, {}, committer);
  try {
    const { epoch } = await store.claimOwnership(10_000);
    store.resetChain(await store.readChain());
    const used: Valkey[] = [];
    for (let i = 0; i < 4; i++) {
      await store.commit(stage(store, data.keys, epoch, i));
      used.push(store.lastCommitOn().valkey);
      expect(await store.waitDurable(10_000, store.lastCommitOn())).toBeGreaterThanOrEqual(0);
    }
    expect(used).toEqual([writer, committer, writer, committer]);
    expect(await data.valkey.get(data.keys.commitCount)).toBe("4");
    expect(await data.eventCount()).toBe(4);
  } finally {
    await data.deleteAll();
    data.close();
  }
});

test(
  "a committer left on a node without the last commit is refused there, and writes nothing",
  async () => {
    const partition = uniquePartition();
    const keys = partitionKeys(partition);
    const data = new PartitionStore(stack.datastoreUrl, partition);
    // Another node that holds the partition as it was before the writer's commit: a replica
    // promoted before that commit reached it.
    let other: RunningValkey | undefined;
    try {
      other = await startValkey({
        dir: join(tempDir("matchd-two-connections-"), "other"),
        appendonly: false,
      });
      const writer = await connect(stack.datastoreUrl, "two-connections-writer");
      const stranded = await connect(other.url, "two-connections-stranded");
      const store = new ConductorStore(writer, keys, writer, writer, {}, stranded);
      const { epoch } = await store.claimOwnership();
      await stranded.set(keys.ownerEpoch, String(epoch));
      store.resetChain(await store.readChain());

      await store.commit(stage(store, keys, epoch, 0));
      expect(store.lastCommitOn().valkey).toBe(writer);
      const refused = store.commit(stage(store, keys, epoch, 1));
      await expect(refused).rejects.toBeInstanceOf(DivergedError);
      await expect(refused).rejects.toThrow("DIVERGED 1 0");
      expect(await stranded.exists(keys.commitCount, keys.events)).toBe(0);
      // The count is unknown after a refusal: the conductor reloads before it commits again.
      expect(store.chainFor().builtOn).toBe(-1);
    } finally {
      await other?.stop();
      await data.deleteAll();
      data.close();
    }
  },
  stackStartTimeoutMs,
);
