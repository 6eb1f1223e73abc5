// The appendfsync watch's and the replica count's verdicts, with stub connections standing in
// for the server's and the Sentinels' answers (the real servers' part is tested with the
// conductor and outbox on private pairs and HA stacks).

import { expect, test } from "bun:test";
import type { Logger } from "../../src/infra/log";
import { createValkey, type Valkey } from "../../src/infra/valkey/client";
import { FsyncPolicyWatch } from "../../src/infra/valkey/policy-watch";
import type { SentinelReplicaView } from "../../src/infra/valkey/replica-rule";
import { testStack } from "../support/stack";

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;

function stubServer(): { valkey: Valkey; role: string; fsync: string; failing: boolean } {
  const server = {
    role: "master",
    fsync: "always",
    failing: false,
    valkey: undefined as unknown as Valkey,
  };
  server.valkey = {
    info: async () => {
      if (server.failing) throw new Error("Connection is closed.");
      return `# Replication\r\nrole:${server.role}\r\n`;
    },
    call: async () => {
      if (server.failing) throw new Error("Connection is closed.");
      return ["appendfsync", server.fsync];
    },
  } as unknown as Valkey;
  return server;
}

test("always on a primary holds; anything else, a replica, or two failed reads in a row do not", async () => {
  const server = stubServer();
  const watch = new FsyncPolicyWatch(server.valkey, quiet);
  await watch.check();
  expect(watch.violation()).toBeUndefined();

  server.fsync = "everysec";
  await watch.check();
  expect(watch.violation()).toContain("appendfsync is everysec");

  server.fsync = "always";
  await watch.check();
  expect(watch.violation()).toBeUndefined();

  server.role = "slave";
  await watch.check();
  expect(watch.violation()).toContain("role is slave");
  server.role = "master";
  await watch.check();

  // One failed read keeps the last answer (a reconnect); failures apart never add up, but
  // the second in a row counts.
  server.failing = true;
  await watch.check();
  expect(watch.violation()).toBeUndefined();
  server.failing = false;
  await watch.check();
  server.failing = true;
  await watch.check();
  expect(watch.violation()).toBeUndefined();
  await watch.check();
  expect(watch.violation()).toContain("unreadable");
  server.failing = false;
  await watch.check();
  expect(watch.violation()).toBeUndefined();
});

/** A primary behind a socket address of its own, with a run id and the replicas it lists. */
function stubPrimary(listed: string[]): Valkey {
  const replication = listed
    .map((address, i) => {
      const [ip, port] = address.split(":");
      return `slave${i}:ip=${ip},port=${port},state=online,offset=1,lag=0\r\n`;
    })
    .join("");
  return {
    stream: { remoteAddress: "10.9.9.9", remotePort: 6379 },
    info: async (section: string) =>
      section === "server"
        ? "# Server\r\nrun_id:run-primary\r\n"
        : `# Replication\r\nrole:master\r\n${replication}`,
    call: async () => ["appendfsync", "always"],
  } as unknown as Valkey;
}

/** Sentinel answers, each round's delay given in turn; counts rounds running at once. */
function stubSentinels(answers: { delayMs: number; views: SentinelReplicaView[] }[]) {
  const source = {
    count: 3,
    running: 0,
    mostAtOnce: 0,
    rounds: 0,
    close() {},
    async poll(): Promise<SentinelReplicaView[]> {
      const answer = answers[Math.min(source.rounds++, answers.length - 1)]!;
      source.running++;
      source.mostAtOnce = Math.max(source.mostAtOnce, source.running);
      await Bun.sleep(answer.delayMs);
      source.running--;
      return answer.views;
    },
  };
  return source;
}

const primary = "valkey-a:6379";
const sentinelView = (replicas: Record<string, string>, epoch = 1): SentinelReplicaView => ({
  master: primary,
  masterRunId: "run-primary",
  configEpoch: epoch,
  masterFlags: ["master"],
  replicas: Object.entries(replicas).map(([address, flags]) => ({
    address,
    flags: flags.split(","),
    roleReported: "slave",
  })),
});

test("F3: one round at a time: a slow round cannot finish after, and overwrite, a newer one", async () => {
  // Round 1 is slow and saw b healthy; a timer tick meanwhile must not start round 2.
  const healthy = [0, 1, 2].map(() => sentinelView({ "10.0.0.2:6379": "slave" }));
  const bDown = [0, 1, 2].map(() => sentinelView({ "10.0.0.2:6379": "slave,s_down" }));
  const sentinels = stubSentinels([
    { delayMs: 200, views: healthy },
    { delayMs: 0, views: bDown },
  ]);
  const watch = new FsyncPolicyWatch(stubPrimary(["10.0.0.3:6379"]), quiet, 60_000, sentinels);
  const slow = watch.countReplicas();
  await Bun.sleep(20);
  const tick = watch.countReplicas();
  await Promise.all([slow, tick]);
  expect(sentinels.mostAtOnce).toBe(1);
  expect(sentinels.rounds).toBe(1);
  expect(watch.requiredReplicas()).toBe(2);
  // The next round starts after, and its newer answer is the one in force.
  await watch.countReplicas();
  expect(sentinels.rounds).toBe(2);
  expect(watch.requiredReplicas()).toBe(1);
});

test("F4: the watched server is found by its run id, under the address the Sentinels announce", async () => {
  // The socket says 10.9.9.9:6379; the Sentinels know the primary as valkey-a:6379.
  const views = [0, 1, 2].map(() => sentinelView({ "10.0.0.3:6379": "slave" }));
  const watch = new FsyncPolicyWatch(
    stubPrimary(["10.0.0.3:6379"]),
    quiet,
    60_000,
    stubSentinels([{ delayMs: 0, views }]),
  );
  await watch.countReplicas();
  expect(watch.violation()).toBeUndefined();
  expect(watch.watchedNode()).toBe("10.9.9.9:6379");
  expect(watch.requiredReplicas()).toBe(1);
});

test("held acknowledgements name the replica they wait for, and since when", async () => {
  // b is not at the primary, yet no Sentinel flags it down: every wait holds for it.
  const views = [0, 1, 2].map(() =>
    sentinelView({ "10.0.0.2:6379": "slave", "10.0.0.3:6379": "slave" }),
  );
  const watch = new FsyncPolicyWatch(
    stubPrimary(["10.0.0.3:6379"]),
    quiet,
    60_000,
    stubSentinels([{ delayMs: 0, views }]),
  );
  const before = Date.now();
  await watch.countReplicas();
  const held = watch.held();
  expect(held?.reason).toContain("10.0.0.2:6379 not acknowledging at the primary");
  expect(held?.since).toBeGreaterThanOrEqual(before);
  await watch.countReplicas();
  expect(watch.held()?.since).toBe(held!.since);
});

test("no Sentinel answering: a connection that moved holds every wait", async () => {
  const watch = new FsyncPolicyWatch(
    stubPrimary([]),
    quiet,
    60_000,
    stubSentinels([{ delayMs: 0, views: [] }]),
  );
  await watch.countReplicas();
  expect(watch.violation()).toContain("no Sentinel answers to vouch for 10.9.9.9:6379");
  expect(watch.watchedNode()).toBeUndefined();
});

test("a hold's end resolves holdLifted once, for every waiter; the next hold gets a new one", async () => {
  const bSilent = [0, 1, 2].map(() =>
    sentinelView({ "10.0.0.2:6379": "slave", "10.0.0.3:6379": "slave" }),
  );
  const bDown = [0, 1, 2].map(() =>
    sentinelView({ "10.0.0.2:6379": "slave,s_down", "10.0.0.3:6379": "slave" }),
  );
  const sentinels = stubSentinels([
    { delayMs: 0, views: bSilent },
    { delayMs: 0, views: bDown },
    { delayMs: 0, views: bSilent },
  ]);
  const watch = new FsyncPolicyWatch(stubPrimary(["10.0.0.3:6379"]), quiet, 60_000, sentinels);
  await watch.countReplicas();
  expect(watch.held()).toBeDefined();
  let lifted = 0;
  const first = watch.holdLifted().then(() => lifted++);
  const second = watch.holdLifted().then(() => lifted++);
  await Bun.sleep(5);
  expect(lifted).toBe(0);
  // The Sentinels flag b down: the count no longer needs it, the hold ends.
  await watch.countReplicas();
  await Promise.all([first, second]);
  expect(lifted).toBe(2);
  expect(watch.held()).toBeUndefined();
  await watch.countReplicas();
  let again = false;
  void watch.holdLifted().then(() => {
    again = true;
  });
  await Bun.sleep(5);
  expect(again).toBe(false);
});

test("the first round counts on a connection that opens with it (lazy), as start() promises", async () => {
  // A real server behind a lazy connection: its generation moves from 0 to 1 during the
  // first round's reads, which must not be taken for a reconnect between them.
  const stack = await testStack();
  const valkey = createValkey(stack.datastoreUrl, { name: "matchd-test-watch", lazy: true });
  const port = new URL(stack.datastoreUrl).port;
  const views = [sentinelView({}, 1)].map((v) => ({
    ...v,
    master: `127.0.0.1:${port}`,
    masterRunId: "",
  }));
  const watch = new FsyncPolicyWatch(valkey, quiet, 60_000, {
    count: 1,
    close() {},
    poll: async () => views,
  });
  try {
    await watch.start();
    expect(watch.watchedNode()).toBe(`127.0.0.1:${port}`);
    expect(watch.violation()).toBeUndefined();
  } finally {
    watch.stop();
  }
});
