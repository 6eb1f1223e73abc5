/**
 * The group commit writes only each order's net change per batch (an order that rests
 * and leaves the book inside one batch writes nothing), stops, halts and post-only orders
 * so that a reload gets them back, the authorisation of pair commands, and the commit
 * script's compact encoding. A differential test: the same commands committed one per batch and many per
 * batch must leave the same keyspace behind, key by key.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ConsumeMessage } from "amqplib";
import { createWorkload } from "../../bench/workloads";
import { commitBatch } from "../../src/conductor/batch";
import { CommitBuilder, commitScript, orderHashFields } from "../../src/conductor/commit-script";
import type { Delivery } from "../../src/conductor/consumer";
import { createConductorMetrics } from "../../src/conductor/metrics";
import { commandOrderId } from "../../src/conductor/net-changes";
import { bookMember, ConductorStore } from "../../src/conductor/store";
import { resolveConfig } from "../../src/config/resolve";
import type { Config } from "../../src/config/schema";
import {
  type CommandEnvelope,
  MatchingEngine,
  MatchingInvariantError,
  ResultCodes,
} from "../../src/domain/index";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { PartitionStore, partitionCount } from "./helpers";
import { OrderCommands, scenario } from "./order-commands";

let stack: TestStack;

beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);

/** The broker user these tests' pair commands come from, and the one the config lists. */
const operator = "ops";

function conductorConfig(partition: number): Config {
  const resolved = resolveConfig(
    {
      MATCHING_OPERATOR_USERS: `someone, ${operator}`,
      MATCHING_PARTITION: String(partition),
      MATCHING_PARTITION_COUNT: String(partitionCount),
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      MATCHING_BROKER_URL: stack.brokerUrl,
      MATCHING_DURABILITY: "memory",
    },
    new Map(),
    "conductor",
  );
  if (!resolved.ok) throw new Error(resolved.problems.join("; "));
  return resolved.config;
}

/**
 * `userId`: the AMQP user-id property, which the broker checks against the connection's user
 * (null: a message without one).
 */
function delivery(command: CommandEnvelope, userId: string | null = operator): Delivery {
  const message = {
    content: Buffer.from(JSON.stringify(command)),
    fields: {},
    properties: { headers: {}, correlationId: command.correlationId, userId: userId ?? undefined },
  } as unknown as ConsumeMessage;
  return { message, generation: 1, receivedAtMs: 0 };
}

/** Every key of the partition but the epoch, with its content (streams: entry fields only). */
async function dump(store: PartitionStore): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const keys = (await store.valkey.keys(`${store.keys.prefix}*`)).sort();
  for (const key of keys) {
    if (key === store.keys.ownerEpoch) continue;
    const type = await store.valkey.type(key);
    if (type === "string") {
      out[key] = { value: await store.valkey.get(key), expires: (await store.valkey.ttl(key)) > 0 };
    } else if (type === "hash") out[key] = await store.valkey.hgetall(key);
    else if (type === "zset") out[key] = await store.valkey.zrange(key, 0, -1, "WITHSCORES");
    else if (type === "set") out[key] = (await store.valkey.smembers(key)).sort();
    else if (type === "stream") {
      out[key] = (await store.valkey.xrange(key, "-", "+")).map(([, fields]) => fields);
    } else out[key] = type;
  }
  return out;
}

describe("group commit", () => {
  const partition = uniquePartition();
  let store: PartitionStore;

  beforeAll(() => {
    store = new PartitionStore(stack.datastoreUrl, partition);
  });
  afterAll(async () => {
    await store.deleteAll();
    store.close();
  });

  /** An emptied partition, owned anew, with a fresh engine: one batch context. */
  async function freshContext() {
    await store.deleteAll();
    const config = conductorConfig(partition);
    const conductorStore = new ConductorStore(store.valkey, store.keys);
    const { epoch } = await conductorStore.claimOwnership();
    // As the conductor's reload does: the next commit builds on the count read with the books.
    conductorStore.resetChain(await conductorStore.readChain());
    return {
      config,
      engine: new MatchingEngine(),
      store: conductorStore,
      keys: store.keys,
      metrics: createConductorMetrics(
        config,
        () => 0,
        () => 0,
      ),
      epoch,
      unacknowledged: new Map<string, number>(),
      // One time for every batch: the first ticks, the rest see the same millisecond.
      nowMs: 1_800_000_000_000,
      backlog: { marked: false },
    };
  }

  async function commitAll(
    commands: readonly CommandEnvelope[],
    batchSize: number,
  ): Promise<Record<string, unknown>> {
    return (await commitAllWith(commands, batchSize)).keyspace;
  }

  async function commitAllWith(
    commands: readonly CommandEnvelope[],
    batchSize: number,
  ): Promise<{ keyspace: Record<string, unknown>; engine: MatchingEngine }> {
    await store.deleteAll();
    const config = conductorConfig(partition);
    const engine = new MatchingEngine();
    const conductorStore = new ConductorStore(store.valkey, store.keys);
    const { epoch } = await conductorStore.claimOwnership();
    // As the conductor's reload does: the next commit builds on the count read with the books.
    conductorStore.resetChain(await conductorStore.readChain());
    const metrics = createConductorMetrics(
      config,
      () => 0,
      () => 0,
    );
    const context = {
      config,
      engine,
      store: conductorStore,
      keys: store.keys,
      metrics,
      epoch,
      unacknowledged: new Map<string, number>(),
      // One time for every batch: the first ticks, the rest see the same millisecond.
      nowMs: 1_800_000_000_000,
      backlog: { marked: false },
    };
    for (let start = 0; start < commands.length; start += batchSize) {
      await commitBatch(
        context,
        commands.slice(start, start + batchSize).map((command) => delivery(command)),
      );
    }
    return { keyspace: await dump(store), engine };
  }

  /** The partition's books as a conductor's reload reads them, into a fresh engine. */
  async function reloaded(): Promise<MatchingEngine> {
    const conductorStore = new ConductorStore(store.valkey, store.keys);
    const engine = new MatchingEngine();
    for (const order of await conductorStore.loadRestingOrders()) engine.loadRestingOrder(order);
    for (const stop of await conductorStore.loadStopOrders()) engine.loadStopOrder(stop);
    for (const halt of await conductorStore.loadHalts()) engine.loadHalt(halt.pairId, halt.reason);
    engine.check();
    return engine;
  }

  test("many commands per batch leave the same keyspace as one command per batch", async () => {
    for (const name of ["mixed", "sweep"]) {
      const workload = createWorkload(name, { seed: 7, partition, partitionCount });
      const commands = [...workload.prefill()];
      for (let i = 0; i < 400; i++) commands.push(workload.next(i));
      const single = await commitAll(commands, 1);
      const grouped = await commitAll(commands, 250);
      expect(Object.keys(grouped).filter((key) => !(key in single))).toEqual([]);
      expect(Object.keys(single).filter((key) => !(key in grouped))).toEqual([]);
      expect(grouped).toEqual(single);
    }
  }, 120_000);

  test("an exception in the engine that is not an invariant halts like one, naming its command", async () => {
    const context = await freshContext();
    // The fault: the engine throws a plain error on the second command, as a bug would.
    const workload = createWorkload("alternating", { seed: 4, partition, partitionCount });
    const commands = [workload.next(0), workload.next(1)];
    const apply = context.engine.apply.bind(context.engine);
    context.engine.apply = (command, accepted) => {
      if (command.commandId === commands[1]!.commandId) throw new TypeError("a bug");
      return apply(command, accepted);
    };
    const failure = await commitBatch(
      context,
      commands.map((command) => delivery(command)),
    ).catch((error: unknown) => error);
    // A MatchingInvariantError halts the partition (Conductor.halt); a plain one was retried.
    expect(failure).toBeInstanceOf(MatchingInvariantError);
    expect((failure as MatchingInvariantError).commandId).toBe(commands[1]!.commandId);
    expect((failure as Error).message).toContain("a bug");
    expect(await store.eventCount()).toBe(0);
  });

  test("a commit that ran but lost its reply: the redelivery counts its commands once, as fresh", async () => {
    const context = await freshContext();
    const { store: conductorStore } = context;
    // The fault: the commit runs on the real datastore, then its reply is lost.
    const lossy = Object.create(conductorStore) as ConductorStore;
    lossy.commit = async (batch) => {
      await conductorStore.commit(batch);
      throw new Error("reply lost");
    };
    const workload = createWorkload("alternating", { seed: 3, partition, partitionCount });
    const deliveries = [workload.next(0), workload.next(1)].map((command) => delivery(command));
    await expect(commitBatch({ ...context, store: lossy }, deliveries)).rejects.toThrow(
      "reply lost",
    );
    expect(await store.eventCount()).toBe(4);
    // As the conductor does after a failure: the books reloaded, the batch redelivered.
    const again = await commitBatch({ ...context, engine: new MatchingEngine() }, deliveries);
    expect(again.items.map((item) => item.fresh)).toEqual([true, true]);
    expect(again.tally).toMatchObject({ events: 4, duplicates: 0, accepted: 2 });
    expect(await store.eventCount()).toBe(4);
  });

  test("a redelivery renews its commands' markers, so an outage longer than the retention cannot apply them twice", async () => {
    const context = await freshContext();
    const { config, epoch } = context;
    const workload = createWorkload("alternating", { seed: 5, partition, partitionCount });
    const commands = [workload.next(0), workload.next(1)];
    await commitBatch(
      context,
      commands.map((command) => delivery(command)),
    );
    const markers = commands.flatMap((command) => [
      store.keys.processedCommand(command.commandId),
      store.keys.acceptedOrder(commandOrderId(command)!),
    ]);
    // Most of the retention gone while the commands wait, unacknowledged, for durability.
    for (const marker of markers) expect(await store.valkey.expire(marker, 5)).toBe(1);
    const again = await commitBatch(
      context,
      commands.map((command) => delivery(command)),
    );
    expect(again.tally.duplicates).toBe(2);
    for (const marker of markers) {
      expect(await store.valkey.ttl(marker)).toBeGreaterThan(config.dedupRetentionSeconds - 60);
    }
    // Expirations may write nothing, so a batch of pure redeliveries still writes its marker.
    expect(await store.valkey.get(store.keys.conductorHeartbeat)).toBe(String(epoch));
    expect(await store.eventCount()).toBe(4);
  });

  test("bodies the decoders once threw on, and a decoder fault, are refused without failing their batch", async () => {
    const context = await freshContext();
    const raw = (body: string): Delivery => ({
      message: {
        content: Buffer.from(body),
        fields: {},
        properties: { headers: {} },
      } as unknown as ConsumeMessage,
      generation: 1,
      receivedAtMs: 0,
    });
    // superjson makes `type` a BigInt, or the envelope itself (a cycle): JSON.stringify of
    // either threw while the refusal's reason was written, failing the batch on every retry.
    const bigintType = raw(
      '{"json":{"commandId":"poison-1","type":"1"},"meta":{"values":{"type":["bigint"]}}}',
    );
    const cyclicType = raw(
      '{"json":{"commandId":"poison-2","type":null},"meta":{"referentialEqualities":[["type"]]}}',
    );
    // A fault injected into the decoding itself: reading the body throws.
    const faulty = raw("{}");
    Object.defineProperty(faulty.message, "content", {
      get() {
        throw new Error("injected decoder fault");
      },
    });
    const workload = createWorkload("alternating", { seed: 5, partition, partitionCount });
    const good = workload.next(0);
    const { items } = await commitBatch(context, [bigintType, cyclicType, faulty, delivery(good)]);
    const results = items.map((item) => JSON.parse(item.resultJson ?? "{}"));
    expect(results[0]).toMatchObject({ commandId: "poison-1", status: "rejected" });
    expect(results[0].reason).toContain("unknown command type of kind bigint");
    expect(results[1]).toMatchObject({ commandId: "poison-2", status: "rejected" });
    expect(items[2]!.deadLetterReason).toContain("injected decoder fault");
    expect(results[2]).toMatchObject({ commandId: "unidentified", status: "rejected" });
    expect(results[3]).toMatchObject({ commandId: good.commandId, status: "accepted" });
  });

  test("stops, amends, cancel-alls and halts: many per batch leave the keyspace of one per batch, and it reloads whole", async () => {
    for (const seed of [1, 2]) {
      const commands = scenario(new OrderCommands(partition), seed, 600);
      const single = await commitAllWith(commands, 1);
      const grouped = await commitAllWith(commands, 250);
      expect(Object.keys(grouped.keyspace).filter((key) => !(key in single.keyspace))).toEqual([]);
      expect(Object.keys(single.keyspace).filter((key) => !(key in grouped.keyspace))).toEqual([]);
      expect(grouped.keyspace).toEqual(single.keyspace);
      // What a restart loads is what the engine held: every order once, at its own place.
      const engine = grouped.engine;
      const fresh = await reloaded();
      expect([...fresh.restingOrders()]).toEqual([...engine.restingOrders()]);
      expect([...fresh.stopOrders()]).toEqual([...engine.stopOrders()]);
      expect(fresh.haltedPairs()).toEqual(engine.haltedPairs());
      expect(fresh.digest()).toBe(engine.digest());
      expect(engine.stopOrderCount()).toBeGreaterThan(0);
    }
  }, 120_000);

  test("an amend that sends its order to the back of the queue leaves no stale book member", async () => {
    const b = new OrderCommands(partition);
    const { engine } = await commitAllWith(
      [
        b.place("o1", "bid", "99", "1"),
        b.place("o2", "bid", "99", "1"),
        b.amend("o1", { volume: "2" }),
        b.place("o3", "ask", "100", "1"),
        b.amend("o3", { price: "99" }),
      ],
      1,
    );
    // o1 grew (to the back of its level), o3 re-matched with o2 and filled: o1 alone rests.
    const members = await store.valkey.zrange(store.keys.bookRates(partition, "bid"), 0, -1);
    expect(members).toEqual([bookMember(engine.getOrder(b.id("o1"))!)]);
    expect(await store.valkey.zcard(store.keys.bookRates(partition, "ask"))).toBe(0);
    expect(await store.valkey.exists(store.keys.order(b.id("o3")))).toBe(0);
    expect((await reloaded()).digest()).toBe(engine.digest());
  });

  test("a pair command from a broker user not listed is refused as not-authorised, like any reject", async () => {
    const context = await freshContext();
    const b = new OrderCommands(partition);
    const [stranger, none, listed] = [b.halt("by a stranger"), b.halt("by nobody"), b.halt("ops")];
    const { items } = await commitBatch(context, [
      delivery(stranger, "guest"),
      delivery(none, null),
      delivery(listed, operator),
    ]);
    const results = items.map((item) => JSON.parse(item.resultJson ?? "{}"));
    for (const result of results.slice(0, 2)) {
      expect(result).toMatchObject({
        status: "rejected",
        code: ResultCodes.notAuthorised,
        codeName: "not-authorised",
        reason: "pair commands need a broker user listed in MATCHING_OPERATOR_USERS",
      });
    }
    expect(results[2]).toMatchObject({ status: "accepted", code: ResultCodes.ok });
    const events = (await store.events()).map(({ event }) => event);
    expect(events.map((event) => event.type)).toEqual([
      "order.rejected.v1",
      "order.rejected.v1",
      "pair.halted.v1",
    ]);
    expect(events[0]).toMatchObject({
      commandId: stranger.commandId,
      payload: { code: ResultCodes.notAuthorised, commandType: "pair.halt" },
    });
    expect(await store.valkey.hgetall(store.keys.haltedPairs)).toEqual({
      [String(partition)]: "ops",
    });
    expect(await store.storedResults([stranger.commandId])).toEqual(
      new Map([[stranger.commandId, results[0]]]),
    );
  });

  test("post-only is kept in the order hash, and a hash written before it loads as a plain order", async () => {
    const context = await freshContext();
    const b = new OrderCommands(partition);
    await commitBatch(context, [delivery(b.place("po", "bid", "99", "1", { postOnly: true }))]);
    expect(await store.valkey.hget(store.keys.order(b.id("po")), "postOnly")).toBe("1");
    // An order hash as the conductor wrote it before post-only was kept: no postOnly field.
    const old = { ...context.engine.getOrder(b.id("po"))!, id: b.id("old"), sequence: 99 };
    // Every field from postOnly on came later.
    const fields = orderHashFields.slice(0, orderHashFields.indexOf("postOnly"));
    await store.valkey.hset(
      store.keys.order(old.id),
      ...fields.flatMap((field) => [field, String(old[field as keyof typeof old])]),
    );
    await store.valkey.zadd(store.keys.bookRates(partition, "bid"), "99", bookMember(old));
    const loaded = await new ConductorStore(store.valkey, store.keys).loadRestingOrders();
    expect(loaded.map((order) => [order.id, order.postOnly])).toEqual([
      [b.id("po"), true],
      [b.id("old"), undefined],
    ]);
    expect("postOnly" in loaded[1]!).toBe(false);
  });

  test("an order that rests and fills inside one batch writes no order hash", async () => {
    const workload = createWorkload("alternating", { seed: 3, partition, partitionCount });
    const commands = [workload.next(0), workload.next(1)];
    const state = await commitAll(commands, 2);
    expect(Object.keys(state).filter((key) => key.includes(":order:"))).toEqual([]);
    expect((state[store.keys.events] as unknown[]).length).toBe(4);
  });
});

describe("the commit script's encoding", () => {
  test("order hashes and key indexes are checked before any write", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(stack.datastoreUrl, partition);
    const { keys } = store;
    const run = (batch: CommitBuilder) =>
      store.valkey.eval(commitScript, batch.keys.length, ...batch.keys, ...batch.args);
    try {
      await store.valkey.set(keys.ownerEpoch, "3");
      const values = orderHashFields.map((field) => `${field}-value`);
      const stage = () => {
        const batch = new CommitBuilder(keys.ownerEpoch, 3, keys.eventSequence, {
          key: keys.commitCount,
          builtOn: 0,
        });
        batch.setWithTtl(keys.processedCommand("c1"), "{}", 60);
        batch.setWithTtl(keys.processedCommand("c2"), "{}", 90);
        batch.xadd(keys.events, '{"n":1}');
        batch.replaceOrderHash(keys.order("o1"), values);
        return batch;
      };
      const nothingWritten = async () => {
        expect(
          await store.valkey.exists(
            keys.processedCommand("c1"),
            keys.processedCommand("c2"),
            keys.order("o1"),
            keys.events,
          ),
        ).toBe(0);
      };

      const badKey = stage();
      badKey.args.push("D", "1");
      await expect(run(badKey)).rejects.toThrow("BADOP key D 1");
      await nothingWritten();

      // KEYS[3] is the sequence counter: no op may write it.
      const sequenceKey = stage();
      sequenceKey.args.push("D", "3");
      await expect(run(sequenceKey)).rejects.toThrow("BADOP key D 3");
      await nothingWritten();

      // KEYS[4] is the commit counter: no op may write it either.
      const countKey = stage();
      countKey.args.push("D", "4");
      await expect(run(countKey)).rejects.toThrow("BADOP key D 4");
      await nothingWritten();

      const beyondKeys = stage();
      beyondKeys.args.push("D", String(beyondKeys.keys.length + 1));
      await expect(run(beyondKeys)).rejects.toThrow("BADOP key D");
      await nothingWritten();

      const badHeader = stage();
      badHeader.args[2] = String(badHeader.keys.length);
      await expect(run(badHeader)).rejects.toThrow("BADOP header");
      await nothingWritten();

      // Two markers (the second with its own TTL), one event, one order hash.
      expect(await run(stage())).toBe(4);
      expect(await store.valkey.hgetall(keys.order("o1"))).toEqual(
        Object.fromEntries(orderHashFields.map((field) => [field, `${field}-value`])),
      );
      // Markers expire (a TTL of -1 or -2 would mean none, or no key); the order hash never does.
      const ttl1 = await store.valkey.ttl(keys.processedCommand("c1"));
      expect(ttl1).toBeGreaterThan(0);
      expect(ttl1).toBeLessThanOrEqual(60);
      expect(await store.valkey.ttl(keys.processedCommand("c2"))).toBeGreaterThan(60);
      expect(await store.valkey.ttl(keys.order("o1"))).toBe(-1);

      // The same commit again, as ioredis resends it when a reconnect lost the first
      // reply: a no-op, so no event is duplicated.
      expect(await run(stage())).toBe(0);
      expect(await store.valkey.xlen(keys.events)).toBe(1);
    } finally {
      await store.deleteAll();
      store.close();
    }
  });

  test("events are numbered contiguously across batches, and a resent batch numbers none", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(stack.datastoreUrl, partition);
    const { keys } = store;
    const run = (batch: CommitBuilder) =>
      store.valkey.eval(commitScript, batch.keys.length, ...batch.keys, ...batch.args);
    const stage = (command: string, events: number, builtOn: number) => {
      const batch = new CommitBuilder(keys.ownerEpoch, 5, keys.eventSequence, {
        key: keys.commitCount,
        builtOn,
      });
      batch.setWithTtl(keys.processedCommand(command), "{}", 60);
      for (let n = 0; n < events; n++) batch.xadd(keys.events, `{"n":${n}}`);
      return batch;
    };
    try {
      await store.valkey.set(keys.ownerEpoch, "5");
      await run(stage("a", 2, 0));
      expect(await run(stage("a", 2, 1))).toBe(0);
      await run(stage("b", 0, 1));
      await run(stage("c", 3, 2));
      const entries = await store.valkey.xrange(keys.events, "-", "+");
      expect(entries.map(([, fields]) => fields)).toEqual(
        [0, 1, 0, 1, 2].map((n, i) => ["event", `{"n":${n}}`, "seq", String(i + 1)]),
      );
      expect(await store.valkey.get(keys.eventSequence)).toBe("5");
    } finally {
      await store.deleteAll();
      store.close();
    }
  });

  test("a flushed script cache is reloaded and the commit retried once", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(stack.datastoreUrl, partition);
    const conductorStore = new ConductorStore(store.valkey, store.keys);
    try {
      const { epoch } = await conductorStore.claimOwnership();
      conductorStore.resetChain(await conductorStore.readChain());
      const first = new CommitBuilder(
        store.keys.ownerEpoch,
        epoch,
        store.keys.eventSequence,
        conductorStore.chainFor(),
      );
      first.setWithTtl(store.keys.processedCommand("a"), "1", 60);
      await conductorStore.commit(first);
      await store.valkey.script("FLUSH");
      const second = new CommitBuilder(
        store.keys.ownerEpoch,
        epoch,
        store.keys.eventSequence,
        conductorStore.chainFor(),
      );
      second.setWithTtl(store.keys.processedCommand("b"), "2", 60);
      await conductorStore.commit(second);
      expect(
        await store.valkey.mget(store.keys.processedCommand("a"), store.keys.processedCommand("b")),
      ).toEqual(["1", "2"]);
    } finally {
      await store.deleteAll();
      store.close();
    }
  });
});
