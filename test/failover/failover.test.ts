/**
 * Failovers, for real: a conductor and an outbox on the Sentinel URL of the HA
 * stack (a primary, two replicas, three Sentinels) follow a SIGKILL of the primary and a
 * Sentinel-ordered switch by themselves, lose nothing acknowledged and publish no phantom; a
 * durability wait needs every healthy replica, and leaves out one that stopped answering.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import amqp, { type ConsumeMessage } from "amqplib";
import { StreamOrderCheck } from "../../bench/stream-order";
import { createWorkload } from "../../bench/workloads";
import type { CommandEnvelope } from "../../src/domain/index";
import { Resequencer } from "../../src/feed/resequencer";
import { brokerUrls } from "../../src/infra/amqp/broker-urls";
import { allEventExchanges, commandQueue } from "../../src/infra/amqp/topology";
import { createValkey } from "../../src/infra/valkey/client";
import {
  currentPrimary,
  killBrokerNode,
  killValkeyNode,
  queueLeader,
  restartBrokerNode,
  restartValkeyNode,
  type StackInfo,
  stackDown,
  stackStatus,
  stackUp,
  waitForFailover,
} from "../../src/stack/index";
import {
  alternatingRpcCommands,
  type ConductorProcess,
  disposeAll,
  eventually,
  openReplies,
  PartitionStore,
  Publisher,
  referenceRun,
  settledDigest,
  startConductor,
} from "../conductor/helpers";
import { metricNumber, startOutbox } from "../outbox/helpers";
import { stackStartTimeoutMs } from "../support/stack";
import { tempDir } from "../support/temp-dir";

let info: StackInfo;
let dir: string;
let publisher: Publisher;

beforeAll(async () => {
  dir = tempDir("matchd-ha-test-");
  info = await stackUp({ dir, ha: true });
  publisher = await Publisher.open(firstBrokerNode());
}, stackStartTimeoutMs);

afterAll(async () => {
  await disposeAll();
  await publisher?.close();
  await stackDown({ dir });
});

/** A reply queue, the partition's queue declared, and `count` alternating RPC commands. */
async function rpcRun(partition: number, seed: number, count: number) {
  const replies = await openReplies(publisher.channelModel());
  await publisher.declare(partition);
  return { replies, ...alternatingRpcCommands(publisher, partition, seed, count, replies.queue) };
}

/** One node of the stack's broker (a cluster's list under --ha), for amqplib's own connects. */
function firstBrokerNode(): string {
  return brokerUrls(info.brokerUrl)[0]!;
}

/** The pid of a data node now (a restart records a new one). */
async function nodePid(name: string): Promise<number> {
  const found = (await stackStatus(dir)).processes.find((p) => p.name === name && p.running);
  if (found === undefined) throw new Error(`${name} is not running`);
  return found.pid;
}

/**
 * Waits until Sentinel has no failover under way and the primary it names lists both
 * replicas online: a restarted node rejoins only when Sentinel reconfigures it (~10 s).
 */
async function settledTopology(): Promise<{ name: string; port: number }> {
  const sentinel = createValkey(`redis://127.0.0.1:${info.ha!.sentinels[0]!.port}`, {
    name: "matchd-test-sentinel",
  });
  try {
    let primary = await currentPrimary(info);
    await eventually(
      "no failover under way and both replicas online",
      async () => {
        const master = (await sentinel.call("SENTINEL", "MASTER", "matchd")) as string[];
        primary = await currentPrimary(info);
        const node = createValkey(`redis://127.0.0.1:${primary.port}`, { name: "matchd-test" });
        node.on("error", () => undefined);
        const replication = await node.info("replication").finally(() => node.disconnect());
        // Sentinel's own view too: it promotes only a replica it sees up and linked, and it
        // learns of a restarted node's new role up to seconds after the node took it.
        const replicas = (await sentinel.call("SENTINEL", "REPLICAS", "matchd")) as string[][];
        const field = (fields: string[], name: string) => fields[fields.indexOf(name) + 1];
        const promotable = replicas.filter(
          (r) => field(r, "flags") === "slave" && field(r, "master-link-status") === "ok",
        );
        return (
          master[master.indexOf("flags") + 1] === "master" &&
          (replication.match(/state=online,offset=\d+,lag=[01]\b/g) ?? []).length === 2 &&
          promotable.length === 2
        );
      },
      45_000,
    );
    return primary;
  } finally {
    sentinel.disconnect();
  }
}

function stackOf(stack: StackInfo) {
  return {
    datastoreUrl: stack.datastoreUrl,
    replicaUrl: stack.replicaUrl,
    brokerUrl: stack.brokerUrl,
  };
}

async function startOn(partition: number): Promise<ConductorProcess> {
  return startConductor(stackOf(info), partition);
}

/** Every command exactly one stored result on the current primary, equal to its reply. */
async function expectStoredAsReplied(
  partition: number,
  commands: readonly CommandEnvelope[],
  replies: Map<string, Record<string, unknown>>,
): Promise<void> {
  const store = new PartitionStore(info.datastoreUrl, partition);
  try {
    const stored = await store.storedResults(commands.map((c) => c.commandId));
    for (const command of commands) {
      const result = stored.get(command.commandId);
      expect(result).toBeDefined();
      expect(replies.get(command.commandId)).toEqual(result as Record<string, unknown>);
    }
  } finally {
    store.close();
  }
}

/** The conductor's books, once every command settled, equal the pure engine's replay. */
async function expectBooksAsReplayed(
  conductor: ConductorProcess,
  partition: number,
  commands: readonly CommandEnvelope[],
  via: Publisher = publisher,
): Promise<void> {
  const store = new PartitionStore(info.datastoreUrl, partition);
  try {
    const ids = commands.map((c) => c.commandId);
    const settled = await settledDigest(conductor, store, via, partition, ids);
    const reference = referenceRun(commands);
    expect(settled).toEqual({ digest: reference.digest, restingOrders: reference.resting });
  } finally {
    store.close();
  }
}

describe("datastore failover", () => {
  test("a client whose reconnect is cut short (as a failover detector may do) connects again", async () => {
    const sentinel = info.ha!.sentinels[0]!;
    const client = createValkey(`redis+sentinel://127.0.0.1:${sentinel.port}/matchd`, {
      name: "matchd-test-revive",
    });
    client.on("error", () => undefined);
    let ended = false;
    client.on("end", () => {
      ended = true;
    });
    const admin = createValkey(info.datastoreUrl, { name: "matchd-test-admin" });
    try {
      await client.ping();
      const id = String(await client.client("ID"));
      // Every Sentinel: ioredis learns them all, and asks the next when one does not answer.
      const pids = await Promise.all(info.ha!.sentinels.map((s) => nodePid(s.name)));
      for (const pid of pids) process.kill(pid, "SIGSTOP");
      try {
        await admin.client("KILL", "ID", id);
        // The reconnect now waits on a stopped Sentinel: a failover detector's disconnect
        // lands there.
        await eventually("reconnecting", () => client.status === "connecting", 5000);
        (client as unknown as { connector: { disconnect(): void } }).connector.disconnect();
      } finally {
        for (const pid of pids) process.kill(pid, "SIGCONT");
      }
      await eventually("ended by ioredis", () => ended, 5000);
      await eventually("connected again", () => client.status === "ready", 10_000);
      expect(await client.ping()).toBe("PONG");
    } finally {
      client.disconnect();
      admin.disconnect();
    }
  }, 30_000);

  test("a SIGKILLed primary: the conductor follows the promotion, nothing acknowledged is lost", async () => {
    const partition = 11;
    const { replies, commands, publish } = await rpcRun(partition, 7, 400);
    const events = await openQuorumSink(firstBrokerNode(), partition);
    const conductor = await startOn(partition);
    const outbox = await startOutbox(stackOf(info), partition);
    await publish(0, 200);
    await eventually("the first half replied", () => replies.replies.size === 200, 30_000);
    const victim = await currentPrimary(info);
    const sending = publish(200, 400);
    await killValkeyNode(info, victim.name);
    // The probe tells an orchestrator while the partition waits for a promotion.
    await eventually(
      "not ready while no primary answers",
      async () => (await fetch(`${conductor.url}/readyz`)).status === 503,
      5000,
    );
    const promoted = await waitForFailover(info, { from: victim.name, timeoutMs: 30_000 });
    expect(promoted.name).not.toBe(victim.name);
    await sending;
    await eventually("every command replied", () => replies.replies.size === 400, 60_000);
    await eventually(
      "ready again on the new primary",
      async () => (await fetch(`${conductor.url}/readyz`)).status === 200,
      30_000,
    );
    await expectStoredAsReplied(partition, commands, replies.replies);
    await expectBooksAsReplayed(conductor, partition, commands);
    expect(await conductor.metric("matching_datastore_failovers_total")).toBeGreaterThanOrEqual(1);
    expect(await conductor.metric("matching_datastore_last_recovery_seconds")).toBeGreaterThan(0);
    expect(conductor.log()).toContain("datastore primary changed");
    // Two events per alternating command, each id once with one payload.
    await eventually("every event published", () => events.byId.size === 800, 60_000);
    expect(events.phantoms()).toBe(0);
    expect(events.outOfOrder()).toBe(0);
    expect(
      metricNumber(await outbox.metrics(), "matching_datastore_failovers_total"),
    ).toBeGreaterThanOrEqual(1);
    await restartValkeyNode(info, victim.name);
    await Promise.all([replies.close(), events.close()]);
    expect(await conductor.stop()).toBe(0);
    expect(await outbox.stop()).toBe(0);
  }, 120_000);

  test("a Sentinel-ordered switch demotes the primary under the conductor; it moves on", async () => {
    const partition = 12;
    const { replies, commands, publish } = await rpcRun(partition, 8, 200);
    const conductor = await startOn(partition);
    const outbox = await startOutbox(stackOf(info), partition);
    await publish(0, 100);
    await eventually("the first half replied", () => replies.replies.size === 100, 30_000);
    // The last test restarted a node: Sentinel refuses a switch while it still reconfigures.
    const before = await settledTopology();
    const sentinel = createValkey(`redis://127.0.0.1:${info.ha!.sentinels[0]!.port}`, {
      name: "matchd-test-sentinel",
    });
    await sentinel.call("SENTINEL", "FAILOVER", "matchd");
    sentinel.disconnect();
    // Commands keep coming through the failover: 100 over about 2 s.
    const sending = (async () => {
      for (let i = 100; i < 200; i += 5) {
        await publish(i, i + 5);
        await Bun.sleep(100);
      }
    })();
    await waitForFailover(info, { from: before.name, timeoutMs: 30_000 });
    await sending;
    await eventually("every command replied", () => replies.replies.size === 200, 60_000);
    // The old primary's writes were paused as the failover began, so its stream stops where
    // the promoted replica's history forks (bench failover measures what that saves).
    expect(conductor.log()).toContain("a failover of the primary began: its writes are paused");
    await expectStoredAsReplied(partition, commands, replies.replies);
    await expectBooksAsReplayed(conductor, partition, commands);
    await replies.close();
    // While the Sentinels failed the primary over, batches were held (by the conductor, or
    // by the paused primary when one was already on its way), not committed there to fail:
    // only those already in flight (two at most) failed for it.
    expect(conductor.log()).toContain("the Sentinels forbid acknowledging on this primary");
    const failedForTheFailover = conductor
      .log()
      .split("\n")
      .filter((line) => line.includes("batch failed") && line.includes("no longer holds"));
    expect(failedForTheFailover.length).toBeLessThanOrEqual(2);
    // The outbox's reads write to the stream's group: it saw the failover too, and held them
    // (or the paused primary held one already on its way).
    expect(outbox.stderr()).toContain("the Sentinels forbid acknowledging on this primary");
    expect(await conductor.stop()).toBe(0);
    expect(await outbox.stop()).toBe(0);
  }, 120_000);

  test("a connection follows a switch once: the late Sentinels' announcements leave it be", async () => {
    const before = await settledTopology();
    const client = createValkey(info.datastoreUrl, { name: "matchd-test-switch-once" });
    client.on("error", () => undefined);
    const readyOn: string[] = [];
    client.on("ready", () => {
      const socket = (client as unknown as { stream: { remotePort: number } }).stream;
      readyOn.push(String(socket.remotePort));
    });
    try {
      await client.ping();
      const sentinel = createValkey(`redis://127.0.0.1:${info.ha!.sentinels[0]!.port}`, {
        name: "matchd-test-sentinel",
      });
      await sentinel.call("SENTINEL", "FAILOVER", "matchd");
      sentinel.disconnect();
      const promoted = await waitForFailover(info, { from: before.name, timeoutMs: 30_000 });
      await eventually("on the new primary", () => readyOn.length >= 2, 10_000);
      // Every Sentinel announces the switch within about a second of its leader.
      await Bun.sleep(4000);
      expect(readyOn.slice(1)).toEqual([String(promoted.port)]);
    } finally {
      client.disconnect();
    }
  }, 60_000);

  test("an acknowledgement waits for every healthy replica; a stalled one is left out after the lag limit", async () => {
    const partition = 13;
    const { replies, publish } = await rpcRun(partition, 9, 2);
    const primary = await settledTopology();
    const conductor = await startOn(partition);
    const replica = info.ha!.nodes.find((n) => n.name !== primary.name)!;
    await eventually(
      "the conductor's waits need both replicas",
      async () => (await conductor.metric("matching_durability_replicas_required")) === 2,
      10_000,
    );
    // A replica that stops: with WAITAOF 1 1 the other replica would confirm at once.
    const pid = await nodePid(replica.name);
    process.kill(pid, "SIGSTOP");
    const stoppedAt = performance.now();
    try {
      await publish(0, 1);
      // The primary counts a replica's lag in whole seconds since its last acknowledgement
      // (sent once a second): with the 2 s limit it is left out 1 to 3 s after the stop.
      await Bun.sleep(800);
      expect(replies.replies.size).toBe(0);
      // Meanwhile /readyz says which replica holds the acknowledgements, and since when.
      let held: { durabilityHeld?: { reason: string; since: string } } = {};
      await eventually(
        "readyz names the held acknowledgements",
        async () => {
          held = (await (await fetch(`${conductor.url}/readyz`)).json()) as typeof held;
          return held.durabilityHeld !== undefined;
        },
        5000,
      );
      expect(held.durabilityHeld!.reason).toContain(`${replica.port} not acknowledging`);
      expect(Date.parse(held.durabilityHeld!.since)).toBeGreaterThan(Date.now() - 10_000);
      await eventually(
        "replied without the stalled replica",
        () => replies.replies.size === 1,
        15_000,
      );
      expect(performance.now() - stoppedAt).toBeGreaterThan(1000);
    } finally {
      process.kill(pid, "SIGCONT");
    }
    await publish(1, 2);
    await eventually("replied once the replica is back", () => replies.replies.size === 2, 30_000);
    await replies.close();
    expect(await conductor.stop()).toBe(0);
  }, 90_000);
});

describe("boot during a failover", () => {
  test("a conductor started as a planned handover begins comes up by itself, no restart", async () => {
    const partition = 15;
    const { replies, publish } = await rpcRun(partition, 10, 20);
    const before = await settledTopology();
    const sentinel = createValkey(`redis://127.0.0.1:${info.ha!.sentinels[1]!.port}`, {
      name: "matchd-test-sentinel",
    });
    await sentinel.call("SENTINEL", "FAILOVER", "matchd");
    sentinel.disconnect();
    // Its boot checks run while Sentinel demotes the primary and promotes a replica.
    const conductor = await startConductor(stackOf(info), partition, { waitReady: false });
    await waitForFailover(info, { from: before.name, timeoutMs: 30_000 });
    await eventually(
      "ready on the new primary",
      async () => (await fetch(`${conductor.url}/readyz`)).status === 200,
      30_000,
    );
    expect(conductor.process.exitCode).toBeNull();
    await publish(0, 20);
    await eventually("every command replied", () => replies.replies.size === 20, 30_000);
    await replies.close();
    expect(await conductor.stop()).toBe(0);
  }, 90_000);
});

describe("broker failover", () => {
  test("the command queue's leader node is SIGKILLed: conductor and outbox move on, nothing lost", async () => {
    const partition = 14;
    const nodes = info.ha?.brokerNodes ?? [];
    expect(nodes).toHaveLength(3);
    const workload = createWorkload("alternating", { seed: 15, partition, partitionCount: 1024 });
    const commands = Array.from({ length: 300 }, (_, i) => workload.next(i));
    await publisher.declare(partition);
    const leader = await queueLeader(info, commandQueue(partition));
    expect(leader).toBeDefined();
    // The test's own publisher and event sink stay on a node that lives; the sink's queue is
    // a quorum queue, so the events routed while the leader's node is down wait in it.
    const survivor = nodes.find((n) => n.name !== leader)!;
    const sender = await Publisher.open(survivor.url);
    const events = await openQuorumSink(survivor.url, partition);
    const conductor = await startOn(partition);
    const outbox = await startOutbox(stackOf(info), partition);
    const store = new PartitionStore(info.datastoreUrl, partition);
    const storedCount = async () =>
      (await store.storedResults(commands.map((c) => c.commandId))).size;
    try {
      await publishConfirmed(sender, partition, commands.slice(0, 150));
      await eventually("the first half stored", async () => (await storedCount()) === 150, 30_000);
      await killBrokerNode(info, leader!);
      // A quorum queue electing a leader nacks what it cannot take: sent again until confirmed.
      await publishConfirmed(sender, partition, commands.slice(150));
      await eventually("every command stored", async () => (await storedCount()) === 300, 60_000);
      // Two events per alternating command, each id once with one payload.
      await eventually("every event received", () => events.byId.size === 600, 60_000);
      expect(events.phantoms()).toBe(0);
      expect(events.outOfOrder()).toBe(0);
      await expectBooksAsReplayed(conductor, partition, commands, sender);
      await restartBrokerNode(info, leader!);
      expect(await conductor.stop()).toBe(0);
      expect(await outbox.stop()).toBe(0);
    } finally {
      store.close();
      await events.close();
      await sender.close();
    }
  }, 150_000);
});

/** Publishes with confirms, again after a nack or a failed confirm, until all are confirmed. */
async function publishConfirmed(
  sender: Publisher,
  partition: number,
  commands: readonly CommandEnvelope[],
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await sender.publish(partition, commands, { persistent: true });
      return;
    } catch (error) {
      // Duplicates are answered from their stored results: sending all again is safe.
      if (attempt >= 20) throw error;
      await Bun.sleep(250);
    }
  }
}

/**
 * A quorum queue of the test's own bound to every event exchange, read on one node: every event
 * of one partition by id, copies of an id whose bytes differ (phantoms), and new events that
 * arrived behind a stream offset already passed.
 */
async function openQuorumSink(url: string, partition: number) {
  const connection = await amqp.connect(url);
  connection.on("error", () => undefined);
  const channel = await connection.createChannel();
  const queue = `matchd-test-sink-${process.pid}-${partition}`;
  await channel.assertQueue(queue, { durable: true, arguments: { "x-queue-type": "quorum" } });
  for (const exchange of allEventExchanges) {
    await channel.assertExchange(exchange, "direct", { durable: true });
    await channel.bindQueue(queue, exchange, exchange);
  }
  const byId = new Map<string, string>();
  let phantoms = 0;
  const order = new StreamOrderCheck();
  // Delivered in the order restored by sequence number, as the contract tells consumers to.
  const resequencer = new Resequencer<ConsumeMessage>((message, copy) => {
    const body = message.content.toString();
    const id = String(message.properties.messageId);
    const before = byId.get(id);
    order.record(message.properties.headers?.["x-partition-offset"], copy || before !== undefined);
    if (before === undefined) byId.set(id, body);
    else if (before !== body) phantoms++;
  });
  await channel.consume(queue, (message) => {
    if (message === null) return;
    channel.ack(message);
    const body = message.content.toString();
    if ((JSON.parse(body) as { partition: number }).partition !== partition) return;
    resequencer.push(message.properties.headers?.["x-partition-sequence"], message);
  });
  return {
    byId,
    phantoms: () => phantoms,
    /** Reordered, unorderable, or still held behind a gap. */
    outOfOrder: () =>
      order.outOfOrder + order.withoutOffset + resequencer.withoutSequence + resequencer.waiting,
    close: async () => {
      await channel.deleteQueue(queue).catch(() => undefined);
      await connection.close().catch(() => undefined);
    },
  };
}
