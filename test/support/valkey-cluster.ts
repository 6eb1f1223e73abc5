/**
 * A private Valkey Cluster for tests (the one `stack up --cluster` starts), and a slot
 * migration done by hand (SETSLOT IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE) as an
 * operator's reshard does it.
 */
import Redis from "ioredis";
import { freePorts } from "../../src/stack/process";
import { clusterPortCount, startClusterDatastore } from "../../src/stack/valkey-cluster";
import { tempDir } from "./temp-dir";

export interface ValkeyCluster {
  ports: number[];
  /** redis+cluster://127.0.0.1:p1,.../ naming every node. */
  url: string;
  /** The port of the primary that owns `key`'s slot. */
  ownerOf(key: string): Promise<number>;
  /** Moves `key`'s slot, and every key in it, to another primary; returns the new owner's port. */
  migrateSlotOf(key: string): Promise<number>;
  stop(): Promise<void>;
}

function client(port: number): Redis {
  const redis = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  return redis;
}

/** The cluster `matchd stack up --cluster` starts, in a temp dir of its own. */
export async function startValkeyCluster(prefix: string): Promise<ValkeyCluster> {
  const started = await startClusterDatastore(
    tempDir(prefix),
    await freePorts(clusterPortCount),
    () => {},
    () => {},
  );
  const ports = Object.values(started.ports);
  const admin = ports.map((port) => client(port));
  const byPort = (port: number) => admin[ports.indexOf(port)]!;
  const slots = async () =>
    (await admin[0]!.call("CLUSTER", "SLOTS")) as [number, number, [string, number, string]][];
  const ownerOf = async (key: string) => {
    const slot = Number(await admin[0]!.call("CLUSTER", "KEYSLOT", key));
    return Number((await slots()).find(([low, high]) => slot >= low && slot <= high)![2][1]);
  };
  return {
    ports,
    url: started.datastoreUrl,
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
      // The target first, then the source, then the rest, as the cluster's reshard does.
      for (const redis of [target, source, ...admin.filter((r) => r !== target && r !== source)]) {
        await redis.call("CLUSTER", "SETSLOT", slot, "NODE", targetId).catch(() => undefined);
      }
      return targetPort;
    },
    async stop() {
      for (const redis of admin) redis.disconnect();
      for (const { pid } of started.processes) {
        try {
          process.kill(pid, "SIGTERM");
        } catch {
          // Gone already.
        }
      }
    },
  };
}
