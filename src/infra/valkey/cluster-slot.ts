/**
 * A partition's connection to a Valkey Cluster: every (re)connect asks a seed node which
 * primary owns the slot of the partition's hash tag, and connects to that primary. One plain
 * connection then carries the partition's scripts and its WAITAOF, which waits for that very
 * connection's writes on that shard, as on a single primary. A MOVED, ASK or TRYAGAIN reply
 * (the slot is migrating or moved) drops the connection: the next connect finds the owner.
 */

// The named export: the compiled binary does not resolve the CommonJS default of the file.
import { StandaloneConnector } from "ioredis/built/connectors";
import type { ClusterAddress } from "./address";
import { probeClient } from "./probe-client";

/** What createValkey hands the connector, beside ioredis's own options. */
export interface ClusterTarget {
  address: ClusterAddress;
  /** A key of the partition: its hash tag names the slot. */
  slotKey: string;
}

type ConnectorOptions = ConstructorParameters<typeof StandaloneConnector>[0] & {
  matchdCluster: ClusterTarget;
};

export class SlotOwnerConnector extends StandaloneConnector {
  private readonly target: ClusterTarget;

  // ioredis hands a connector its options untyped.
  constructor(options: unknown) {
    super(options as ConnectorOptions);
    this.target = (options as ConnectorOptions).matchdCluster;
  }

  override async connect(emitter: Parameters<StandaloneConnector["connect"]>[0]) {
    const owner = await slotOwner(this.target);
    this.options.host = owner.host;
    this.options.port = owner.port;
    return super.connect(emitter);
  }
}

/** Replies after which the connection must find the slot's owner again. */
export function isRedirect(error: Error): boolean {
  return /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(error.message);
}

/** The primary that owns `slotKey`'s slot, asked of each seed in turn. */
export async function slotOwner({
  address,
  slotKey,
}: ClusterTarget): Promise<{ host: string; port: number }> {
  const problems: string[] = [];
  for (const seed of address.seeds) {
    const client = probeClient({ ...seed, username: address.username, password: address.password });
    try {
      await client.connect();
      const slot = Number(await client.call("CLUSTER", "KEYSLOT", slotKey));
      const ranges = (await client.call("CLUSTER", "SLOTS")) as [
        number,
        number,
        [string, number],
      ][];
      const range = ranges.find(([low, high]) => slot >= low && slot <= high);
      if (range === undefined) throw new Error(`no node serves slot ${slot}`);
      const [host, port] = range[2];
      return { host: host === "" ? seed.host : host, port: Number(port) };
    } catch (error) {
      problems.push(`${seed.host}:${seed.port}: ${(error as Error).message}`);
    } finally {
      client.disconnect();
    }
  }
  throw new Error(`no cluster seed answered: ${problems.join("; ")}`);
}
