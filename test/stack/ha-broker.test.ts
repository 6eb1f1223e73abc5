// The broker cluster of `matchd stack up --ha` for real: three RabbitMQ nodes in one
// cluster, a quorum queue with a member on each, its leader SIGKILLed while a consumer on a
// surviving node still reads every confirmed message, the node restarted and rejoined, then
// everything stopped.
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { type ChannelModel, connect } from "amqplib";
import { commandQueue } from "../../src/infra/amqp/topology";
import {
  brokerNodesRunning,
  killBrokerNode,
  queueLeader,
  restartBrokerNode,
  type StackInfo,
  stackDown,
  stackStatus,
} from "../../src/stack/index";
import { eventually } from "../support/eventually";
import { matchdCommand } from "../support/stack";
import { tempDir } from "../support/temp-dir";

const dir = tempDir("matchd-stack-ha-broker-");
const queue = "matchd.ha-broker-test";
const messageCount = 100;

afterAll(async () => {
  await stackDown({ dir });
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** Gone means no such pid, or a zombie: this container's init does not reap orphans. */
function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

/** Command lines of live processes that mention `needle` (zombies have an empty one). */
function processesMentioning(needle: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ");
      if (cmdline.includes(needle)) found.push(`${entry}: ${cmdline}`);
    } catch {
      // The process exited while we looked.
    }
  }
  return found;
}

/** Runs `fn` with a connection to one node, closed afterwards. */
async function on<T>(url: string, fn: (connection: ChannelModel) => Promise<T>): Promise<T> {
  const connection = await connect(url);
  connection.on("error", () => {});
  try {
    return await fn(connection);
  } finally {
    await connection.close().catch(() => {});
  }
}

/** What `D/rabbitmqctl-N` (the wrapper for node N) prints for `args`. */
async function wrapper(file: string, args: string[]): Promise<string> {
  const child = Bun.spawn([join(dir, file), ...args], { stdout: "pipe", stderr: "pipe" });
  const [code, stdout, stderr] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  if (code !== 0) throw new Error(`${file} ${args.join(" ")} exited ${code}: ${stderr}`);
  return stdout;
}

const urlOf = (info: StackInfo, name: string) =>
  info.ha!.brokerNodes.find((n) => n.name === name)!.url;

describe("matchd stack up --ha: the broker cluster", () => {
  let info: StackInfo;
  /** Every pid the stack ever had, the restarted node's old and new ones alike. */
  const everyPid = new Set<number>();

  test("starts three clustered nodes; a quorum queue has a member on each", async () => {
    const started = Date.now();
    const up = Bun.spawn([...matchdCommand, "stack", "up", "--ha", "--no-tap", "--dir", dir], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stderr] = await Promise.all([up.exited, new Response(up.stderr).text()]);
    if (code !== 0) throw new Error(`stack up --ha failed:\n${stderr}`);
    console.log(`stack up --ha (a CLI process) took ${Date.now() - started} ms`);
    const status = await stackStatus(dir);
    expect(status.running).toBe(true);
    info = status.info!;
    for (const pid of Object.values(info.pids)) everyPid.add(pid);

    const nodes = info.ha!.brokerNodes;
    expect(nodes.map((n) => n.name)).toEqual(["rabbitmq-1", "rabbitmq-2", "rabbitmq-3"]);
    expect(new Set(nodes.map((n) => n.nodename.split("-").slice(0, 2).join("-"))).size).toBe(1);
    for (const [i, node] of nodes.entries()) {
      expect(node.nodename).toMatch(new RegExp(`^matchd-[0-9a-f]+-${i + 1}@localhost$`));
      expect(node.url).toBe(`amqp://guest:guest@127.0.0.1:${node.port}/matchd`);
      expect(node.dir).toBe(join(dir, node.name));
    }
    expect(new Set(nodes.flatMap((n) => [n.port, n.distPort])).size).toBe(6);
    const urls = nodes.map((n) => n.url).join(",");
    expect(info.brokerUrl).toBe(urls);
    expect(readFileSync(join(dir, "env"), "utf8")).toContain(`MATCHING_BROKER_URL=${urls}\n`);

    for (const node of nodes) {
      await on(node.url, async (connection) => {
        await connection.createChannel();
      });
    }
    expect(await brokerNodesRunning(info)).toEqual(["rabbitmq-1", "rabbitmq-2", "rabbitmq-3"]);
    expect(status.ha!.broker!.nodes.map((n) => [n.name, n.running, n.up])).toEqual([
      ["rabbitmq-1", true, true],
      ["rabbitmq-2", true, true],
      ["rabbitmq-3", true, true],
    ]);
    // No command queue is declared yet; the next test's status finds the one declared here.
    expect(status.ha!.broker!.commandQueue).toBeUndefined();
    await on(urlOf(info, "rabbitmq-2"), async (connection) => {
      const channel = await connection.createChannel();
      await channel.assertQueue(commandQueue(0), { durable: true });
    });

    // No x-quorum-initial-group-size: RabbitMQ 3.10 places quorum_cluster_size (3) members,
    // at most one per cluster node, so one on each.
    await on(urlOf(info, "rabbitmq-1"), async (connection) => {
      const channel = await connection.createChannel();
      await channel.assertQueue(queue, { durable: true, arguments: { "x-queue-type": "quorum" } });
    });
    await on(urlOf(info, "rabbitmq-3"), async (connection) => {
      const channel = await connection.createChannel();
      expect(await channel.checkQueue(queue)).toMatchObject({ queue, messageCount: 0 });
    });
    const listed = JSON.parse(
      await wrapper("rabbitmqctl-3", [
        "list_queues",
        "-p",
        "matchd",
        "name",
        "type",
        "members",
        "--formatter",
        "json",
      ]),
    ) as { name: string; type: string; members: string[] }[];
    const entry = listed.find((q) => q.name === queue)!;
    expect(entry.type).toBe("quorum");
    expect(entry.members.sort()).toEqual(nodes.map((n) => n.nodename).sort());
    expect(nodes.map((n) => n.name)).toContain((await queueLeader(info, queue))!);
    expect(await queueLeader(info, "matchd.no-such-queue")).toBeUndefined();
  }, 60_000);

  test("a SIGKILLed leader loses no confirmed message; restarted, the node rejoins", async () => {
    await on(urlOf(info, "rabbitmq-2"), async (connection) => {
      const channel = await connection.createConfirmChannel();
      for (let i = 0; i < messageCount; i++) {
        channel.sendToQueue(queue, Buffer.from(String(i)), { persistent: true });
      }
      await channel.waitForConfirms();
    });
    const leader = (await queueLeader(info, queue))!;
    expect(leader).toBeDefined();
    const leaderPid = info.pids[`${leader}-beam`]!;

    const killedAt = Date.now();
    await killBrokerNode(info, leader);
    expect(gone(leaderPid)).toBe(true);
    expect(gone(info.pids[leader]!)).toBe(true);
    const survivors = info.ha!.brokerNodes.map((n) => n.name).filter((n) => n !== leader);
    await eventually(
      "the cluster to report the killed node down",
      async () => (await brokerNodesRunning(info)).join(",") === survivors.join(","),
      15_000,
    );

    // A consumer on a survivor: the two members left elect a new leader, then deliver.
    const received = new Set<string>();
    await on(urlOf(info, survivors[survivors.length - 1]!), async (connection) => {
      await eventually(
        `all ${messageCount} messages from ${survivors.at(-1)}`,
        async () => {
          const channel = await connection.createChannel();
          channel.on("error", () => {});
          try {
            await channel.prefetch(messageCount);
            await channel.consume(queue, (message) => {
              if (message === null) return;
              received.add(message.content.toString());
              channel.ack(message);
            });
            await Bun.sleep(1000);
          } catch {
            // No leader yet: the consume is refused; try again.
          }
          await channel.close().catch(() => {});
          return received.size === messageCount;
        },
        30_000,
        () => `(received ${received.size})`,
      );
    });
    console.log(
      `${leader} killed; all ${received.size} messages read ${Date.now() - killedAt} ms later`,
    );
    expect([...received].map(Number).sort((a, b) => a - b)).toEqual(
      Array.from({ length: messageCount }, (_, i) => i),
    );
    expect(survivors).toContain((await queueLeader(info, queue))!);

    const restartedAt = Date.now();
    await restartBrokerNode(info, leader);
    console.log(`restarted ${leader} rejoined in ${Date.now() - restartedAt} ms`);
    expect(await brokerNodesRunning(info)).toEqual(["rabbitmq-1", "rabbitmq-2", "rabbitmq-3"]);
    const status = await stackStatus(dir);
    expect(status.running).toBe(true);
    const beam = status.processes.find((p) => p.name === `${leader}-beam`)!;
    expect(beam.pid).not.toBe(leaderPid);
    for (const p of status.processes) everyPid.add(p.pid);
    expect(status.ha!.broker!.nodes.every((n) => n.running && n.up)).toBe(true);
    // Declared on rabbitmq-2 without x-queue-type: the vhost's default made it quorum.
    expect(status.ha!.broker!.commandQueue?.queue).toBe(commandQueue(0));
    expect(["rabbitmq-1", "rabbitmq-2", "rabbitmq-3"]).toContain(
      status.ha!.broker!.commandQueue!.leader!,
    );
    await on(urlOf(info, leader), async (connection) => {
      const channel = await connection.createChannel();
      expect(await channel.checkQueue(queue)).toMatchObject({ queue, messageCount: 0 });
    });
  }, 90_000);

  test("stack down stops every process, the restarted node included", async () => {
    const recorded = Object.keys((await stackStatus(dir)).info!.pids);
    const { stopped } = await stackDown({ dir });
    expect(stopped.sort()).toEqual(recorded.sort());
    for (const pid of everyPid) expect(gone(pid)).toBe(true);
    expect(processesMentioning(dir)).toEqual([]);
    expect((await stackStatus(dir)).running).toBe(false);
  }, 30_000);
});
