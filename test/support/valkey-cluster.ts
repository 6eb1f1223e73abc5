/**
 * A private Valkey Cluster for tests: three primaries with a replica each, AOF fsynced on
 * every write, formed with `valkey-cli --cluster create`, and a slot migration done by hand
 * (SETSLOT IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE) as an operator's reshard does it.
 */
import { join } from "node:path";
import Redis from "ioredis";
import { type RunningValkey, startValkey } from "../../src/stack/index";
import { eventually } from "./eventually";
import { tempDir } from "./temp-dir";

export interface ValkeyCluster {
  nodes: RunningValkey[];
  /** redis+cluster://127.0.0.1:p1,.../ naming every node. */
  url: string;
  /** The port of the primary that owns `key`'s slot. */
  ownerOf(key: string): Promise<number>;
  /** Moves `key`'s slot, and every key in it, to another primary; returns the new owner's port. */
  migrateSlotOf(key: string): Promise<number>;
  stop(): Promise<void>;
}

const clusterConfig = [
  "cluster-enabled yes",
  "cluster-config-file nodes.conf",
  "cluster-node-timeout 5000",
];

function client(port: number): Redis {
  const redis = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  return redis;
}

export async function startValkeyCluster(prefix: string): Promise<ValkeyCluster> {
  const dir = tempDir(prefix);
  const nodes: RunningValkey[] = [];
  for (let i = 0; i < 6; i++) {
    nodes.push(
      await startValkey({
        dir: join(dir, `node-${i}`),
        appendonly: true,
        extraArgs: clusterConfig,
      }),
    );
  }
  const create = Bun.spawn(
    [
      "valkey-cli",
      "--cluster",
      "create",
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      "--cluster-replicas",
      "1",
      "--cluster-yes",
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  if ((await create.exited) !== 0) {
    throw new Error(`cluster create failed: ${await new Response(create.stdout).text()}`);
  }
  const admin = nodes.map((n) => client(n.port));
  await eventually(
    "the cluster to be ok with every replica linked",
    async () => {
      for (const redis of admin) {
        const info = String(await redis.call("CLUSTER", "INFO"));
        if (!info.includes("cluster_state:ok")) return false;
        const replication = await redis.info("replication");
        if (replication.includes("role:slave") && !replication.includes("master_link_status:up"))
          return false;
      }
      return true;
    },
    60_000,
  );
  const byPort = (port: number) => admin[nodes.findIndex((n) => n.port === port)]!;
  const slots = async () =>
    (await admin[0]!.call("CLUSTER", "SLOTS")) as [number, number, [string, number, string]][];
  const ownerOf = async (key: string) => {
    const slot = Number(await admin[0]!.call("CLUSTER", "KEYSLOT", key));
    return Number((await slots()).find(([low, high]) => slot >= low && slot <= high)![2][1]);
  };
  return {
    nodes,
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(",")}/`,
    ownerOf,
    async migrateSlotOf(key) {
      const slot = Number(await admin[0]!.call("CLUSTER", "KEYSLOT", key));
      const sourcePort = await ownerOf(key);
      const primaries = [...new Set((await slots()).map((range) => Number(range[2][1])))];
      const targetPort = primaries.find((port) => port !== sourcePort)!;
      const source = byPort(sourcePort);
      const target = byPort(targetPort);
      const sourceId = String(await source.call("CLUSTER", "MYID"));
      const targetId = String(await target.call("CLUSTER", "MYID"));
      await target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", sourceId);
      await source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", targetId);
      for (;;) {
        const keys = (await source.call("CLUSTER", "GETKEYSINSLOT", slot, 100)) as string[];
        if (keys.length === 0) break;
        await source.call("MIGRATE", "127.0.0.1", targetPort, "", 0, 5000, "KEYS", ...keys);
      }
      for (const redis of admin) {
        await redis.call("CLUSTER", "SETSLOT", slot, "NODE", targetId).catch(() => undefined);
      }
      return targetPort;
    },
    async stop() {
      for (const redis of admin) redis.disconnect();
      await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
    },
  };
}
