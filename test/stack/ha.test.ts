// `matchd stack up --ha` for real: three Valkey nodes under three Sentinels (and the broker
// cluster, which ha-broker.test.ts tests) started by the CLI, a SIGKILLed primary failed
// over by the Sentinels, the old primary restarted and made a replica of the new one by
// them, then everything stopped.
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import Redis from "ioredis";
import {
  currentPrimary,
  killValkeyNode,
  restartValkeyNode,
  type StackInfo,
  stackDown,
  stackStatus,
  waitForFailover,
} from "../../src/stack/index";
import { eventually } from "../support/eventually";
import { matchdCommand } from "../support/stack";
import { tempDir } from "../support/temp-dir";

const dir = tempDir("matchd-stack-ha-");

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

/** Runs `fn` with a client of one node or sentinel, closed afterwards. */
async function on<T>(port: number, fn: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1, lazyConnect: true });
  client.on("error", () => {});
  try {
    await client.connect();
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

function field(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)\\r?$`, "m").exec(info)?.[1]?.trim();
}

const portOf = (info: StackInfo, name: string) => info.ha!.nodes.find((n) => n.name === name)!.port;

describe("matchd stack up --ha", () => {
  let info: StackInfo;
  /** Every pid the stack ever had, restarted nodes' old and new ones alike. */
  const everyPid = new Set<number>();

  test("starts three nodes under three sentinels that know each other, valkey-1 the primary", async () => {
    const started = Date.now();
    const up = Bun.spawn([...matchdCommand, "stack", "up", "--ha", "--no-tap", "--dir", dir], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stdout, stderr] = await Promise.all([
      up.exited,
      new Response(up.stdout).text(),
      new Response(up.stderr).text(),
    ]);
    if (code !== 0) throw new Error(`stack up --ha failed:\n${stderr}`);
    console.log(`stack up --ha (a CLI process) took ${Date.now() - started} ms`);
    const status = await stackStatus(dir);
    expect(status.running).toBe(true);
    info = status.info!;
    for (const pid of Object.values(info.pids)) everyPid.add(pid);
    expect(info.ha!.nodes.map((n) => n.name)).toEqual(["valkey-1", "valkey-2", "valkey-3"]);
    expect(info.ha!.sentinels.map((s) => s.name)).toEqual([
      "sentinel-1",
      "sentinel-2",
      "sentinel-3",
    ]);
    expect(info.ha).toMatchObject({
      masterName: "matchd",
      downAfterMs: 1000,
      failoverTimeoutMs: 2000,
    });

    const sentinelUrl = `redis+sentinel://${info.ha!.sentinels.map((s) => `127.0.0.1:${s.port}`).join(",")}/matchd`;
    expect(info.datastoreUrl).toBe(sentinelUrl);
    expect(info.replicaUrl).toBe(`redis://127.0.0.1:${portOf(info, "valkey-2")}`);
    const env = readFileSync(join(dir, "env"), "utf8");
    expect(env).toContain(`MATCHING_DATASTORE_URL=${sentinelUrl}\n`);
    expect(env).toContain(`MATCHING_REPLICA_URL=${info.replicaUrl}\n`);
    expect(stdout).toContain(`MATCHING_DATASTORE_URL=${sentinelUrl}\n`);

    for (const sentinel of info.ha!.sentinels) {
      const flat = (await on(sentinel.port, (c) =>
        c.call("SENTINEL", "MASTER", "matchd"),
      )) as string[];
      const master = new Map(flat.flatMap((v, i) => (i % 2 === 0 ? [[v, flat[i + 1]!]] : [])));
      expect(master.get("num-slaves")).toBe("2");
      expect(master.get("num-other-sentinels")).toBe("2");
      expect(master.get("port")).toBe(String(portOf(info, "valkey-1")));
    }
    expect(await currentPrimary(info)).toEqual({
      name: "valkey-1",
      port: portOf(info, "valkey-1"),
    });
    await on(portOf(info, "valkey-1"), async (primary) => {
      await primary.set("matchd:ha-test:first", "1");
      expect(await primary.call("WAITAOF", "1", "2", "2000")).toEqual([1, 2]);
      expect(await primary.config("GET", "appendfsync")).toEqual(["appendfsync", "always"]);
    });

    expect(status.ha).toMatchObject({
      primary: "valkey-1",
      downAfterMs: 1000,
      failoverTimeoutMs: 2000,
    });
    expect(status.ha!.nodes.map((n) => [n.name, n.role, n.replicaOf])).toEqual([
      ["valkey-1", "master", undefined],
      ["valkey-2", "slave", "valkey-1"],
      ["valkey-3", "slave", "valkey-1"],
    ]);
    expect(status.ha!.sentinels.every((s) => s.up && s.primary === "valkey-1")).toBe(true);
  }, 60_000);

  test("a SIGKILLed primary is failed over; restarted, it becomes the new primary's replica", async () => {
    const oldPort = portOf(info, "valkey-1");
    await on(oldPort, async (primary) => {
      await primary.set("matchd:ha-test:before-kill", "kept");
      expect(await primary.call("WAITAOF", "1", "2", "2000")).toEqual([1, 2]);
    });

    const killedAt = Date.now();
    await killValkeyNode(info, "valkey-1");
    expect(gone(info.pids["valkey-1"]!)).toBe(true);
    const promoted = await waitForFailover(info, {
      from: "valkey-1",
      timeoutMs: 10_000,
      since: killedAt,
    });
    console.log(`failover: ${promoted.name} primary ${promoted.ms} ms after the kill`);
    expect(["valkey-2", "valkey-3"]).toContain(promoted.name);
    expect(await currentPrimary(info)).toEqual({ name: promoted.name, port: promoted.port });
    await on(promoted.port, async (primary) => {
      expect(await primary.get("matchd:ha-test:before-kill")).toBe("kept");
      await primary.set("matchd:ha-test:after-failover", "new");
      // One replica is left to confirm it.
      expect(await primary.call("WAITAOF", "1", "1", "2000")).toEqual([1, 1]);
    });

    const restartedAt = Date.now();
    await restartValkeyNode(info, "valkey-1");
    const restarted = (await stackStatus(dir)).processes.find((p) => p.name === "valkey-1")!;
    expect(restarted.running).toBe(true);
    expect(restarted.pid).not.toBe(info.pids["valkey-1"]);
    everyPid.add(restarted.pid);
    // The primary the Sentinels name now: under load they were seen to switch once more,
    // from the promoted replica to the other one, before the restarted node rejoined.
    let primaryNow = { name: promoted.name, port: promoted.port };
    let replication = "";
    await eventually(
      "the restarted valkey-1 to replicate from the new primary",
      async () => {
        primaryNow = await currentPrimary(info).catch(() => primaryNow);
        replication = await on(oldPort, (c) => c.info("replication")).catch(() => "");
        return (
          primaryNow.port !== oldPort &&
          field(replication, "role") === "slave" &&
          field(replication, "master_port") === String(primaryNow.port) &&
          field(replication, "master_link_status") === "up"
        );
      },
      25_000,
      () => `${replication}\nthe Sentinels name ${primaryNow.name}`,
    );
    console.log(
      `restarted valkey-1 a replica of ${primaryNow.name} after ${Date.now() - restartedAt} ms`,
    );
    await on(oldPort, async (replica) => {
      expect(await replica.get("matchd:ha-test:before-kill")).toBe("kept");
      expect(await replica.get("matchd:ha-test:after-failover")).toBe("new");
    });
    const status = await stackStatus(dir);
    expect(status.ha!.primary).toBe(primaryNow.name);
    expect(status.ha!.nodes.find((n) => n.name === "valkey-1")).toMatchObject({
      role: "slave",
      replicaOf: primaryNow.name,
    });
  }, 60_000);

  test("stack down stops every process, the restarted node included", async () => {
    const { stopped } = await stackDown({ dir });
    expect(stopped.sort()).toEqual(Object.keys(info.pids).sort());
    for (const pid of everyPid) expect(gone(pid)).toBe(true);
    expect(processesMentioning(dir)).toEqual([]);
    expect((await stackStatus(dir)).running).toBe(false);
  }, 30_000);
});
