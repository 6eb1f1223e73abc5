/**
 * `stack up --cluster`'s datastore: a Valkey Cluster of three primaries with a replica each,
 * AOF fsynced on every write, formed with `valkey-cli --cluster create`, ready once every
 * node says cluster_state:ok, sees each primary with its replica, and every replica's link
 * is up.
 */
import Redis from "ioredis";
import type { RecordedProcess } from "./process";
import { StackError } from "./process";
import { startValkey } from "./valkey";

export const clusterNodeNames = [1, 2, 3, 4, 5, 6].map((n) => `valkey-cluster-${n}`);

/** The ports a cluster needs: each node's own, then each node's cluster bus port. */
export const clusterPortCount = 2 * clusterNodeNames.length;

const clusterConfig = [
  "cluster-enabled yes",
  "cluster-config-file nodes.conf",
  "cluster-node-timeout 5000",
];

export interface ClusterDatastore {
  datastoreUrl: string;
  /** A replica's URL, for scripts that read MATCHING_REPLICA_URL. */
  replicaUrl: string;
  processes: RecordedProcess[];
  ports: Record<string, number>;
}

/**
 * `ports` holds each node's port, then each node's cluster bus port: given explicitly, since
 * the default (port + 10000) was not reserved and another process may hold it.
 */
export async function startClusterDatastore(
  root: string,
  ports: number[],
  recordSpawn: (spawned: RecordedProcess) => void,
  log: (line: string) => void,
): Promise<ClusterDatastore> {
  const nodes = await Promise.all(
    clusterNodeNames.map((name, i) =>
      startValkey({
        dir: `${root}/${name}`,
        port: ports[i]!,
        appendonly: true,
        extraArgs: [...clusterConfig, `cluster-port ${busPort(ports, i)}`],
        onSpawn: (p) => recordSpawn({ name, ...p, group: true }),
      }),
    ),
  );
  const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
  const create = Bun.spawn(
    ["valkey-cli", "--cluster", "create", ...addresses, "--cluster-replicas", "1", "--cluster-yes"],
    { stdout: "pipe", stderr: "pipe" },
  );
  if ((await create.exited) !== 0) {
    const output = await new Response(create.stdout).text();
    throw new StackError(
      "start-failed",
      `valkey-cli --cluster create failed: ${output.slice(-800)}`,
    );
  }
  await waitUntilFormed(nodes.map((node) => node.port));
  log(`valkey: cluster of 3 primaries and 3 replicas on ${addresses.join(", ")} ready`);
  const replica = await firstReplica(nodes.map((node) => node.port));
  return {
    datastoreUrl: `redis+cluster://${addresses.join(",")}/`,
    replicaUrl: `redis://127.0.0.1:${replica}`,
    processes: nodes.map((node, i) => ({
      name: clusterNodeNames[i]!,
      pid: node.pid,
      startTicks: node.startTicks,
      group: true,
    })),
    ports: Object.fromEntries(nodes.map((node, i) => [clusterNodeNames[i]!, node.port])),
  };
}

function busPort(ports: readonly number[], node: number): number {
  const port = ports[clusterNodeNames.length + node];
  if (port === undefined) {
    throw new Error(`a cluster needs ${clusterPortCount} ports, got ${ports.length}`);
  }
  return port;
}

async function withNode<T>(port: number, use: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

async function waitUntilFormed(ports: number[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ready = await Promise.all(
      ports.map((port) =>
        withNode(port, async (redis) => {
          const info = String(await redis.call("CLUSTER", "INFO"));
          const replication = await redis.info("replication");
          // Every node's view lists the three primaries, each with its replica.
          const ranges = (await redis.call("CLUSTER", "SLOTS")) as unknown[][];
          return (
            info.includes("cluster_state:ok") &&
            ranges.length === 3 &&
            ranges.every((range) => range.length >= 4) &&
            (!replication.includes("role:slave") || replication.includes("master_link_status:up"))
          );
        }).catch(() => false),
      ),
    );
    if (ready.every(Boolean)) return;
    if (Date.now() > deadline) {
      throw new StackError("start-failed", "the Valkey Cluster did not form within 60 s");
    }
    await Bun.sleep(200);
  }
}

async function firstReplica(ports: number[]): Promise<number> {
  for (const port of ports) {
    const role = await withNode(port, (redis) => redis.info("replication"));
    if (role.includes("role:slave")) return port;
  }
  return ports[0]!;
}
