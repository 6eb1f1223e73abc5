/**
 * Creates ioredis connections with the options matchd relies on: a command issued while
 * disconnected waits in the offline queue for one reconnect attempt at most
 * (maxRetriesPerRequest 1), commands in flight at a disconnect are resent (the conductor's
 * commit and the outbox's reads are safe against that), and reconnects back off to 2 s (to
 * 250 ms through Sentinels). A redis+sentinel:// URL connects through the Sentinels.
 */
import Redis, { type RedisOptions } from "ioredis";
// Before any command: without it, ioredis traces every command under Bun.
import "./tracing-channel";
import { parseDatastoreAddress } from "./address";
import { isRedirect, SlotOwnerConnector } from "./cluster-slot";
import { followPrimarySwitches } from "./switch-detector";

export type Valkey = Redis;

/** How many times each connection became ready: a change means a new physical connection. */
const readyCounts = new WeakMap<Valkey, number>();

/**
 * The number of the connection's current physical connection (bumped on every 'ready'). WAITAOF
 * waits only for writes made on its own physical connection, and ioredis resends a command that
 * was in flight at a disconnect on the next one, where a WAITAOF would return at once: a caller
 * that needs a write durable compares this before the write and after the wait.
 */
export function connectionGeneration(valkey: Valkey): number {
  return readyCounts.get(valkey) ?? 0;
}

export function createValkey(
  url: string,
  options: {
    name: string;
    lazy?: boolean;
    /**
     * Rejects a command not answered within this many milliseconds (none by default): a server
     * that stops answering while its socket stays open must not hang the caller for ever.
     */
    commandTimeoutMs?: number;
    /** The Sentinels' own password, for a redis+sentinel:// URL. */
    sentinelPassword?: string;
    /**
     * A key of the partition the connection serves: a redis+cluster:// URL connects to the
     * primary that owns its slot (partition 0's without one; ignored by the other forms).
     */
    slotKey?: string;
  },
): Valkey {
  const common: RedisOptions = {
    ...(options.commandTimeoutMs === undefined ? {} : { commandTimeout: options.commandTimeoutMs }),
    connectionName: options.name,
    lazyConnect: options.lazy ?? false,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 3000,
    // Backoff capped at 2 s: reconnects forever, never hammers a restarting server.
    retryStrategy: backoff,
  };
  const address = parseDatastoreAddress(url);
  if (typeof address === "string") throw new Error(`datastore URL: ${address}`);
  const client =
    address.kind === "direct"
      ? new Redis(url, common)
      : address.kind === "cluster"
        ? new Redis({ ...common, ...clusterOptions(address, options.slotKey) })
        : new Redis({ ...common, ...sentinelOptions(address, options.sentinelPassword) });
  client.on("ready", () => readyCounts.set(client, connectionGeneration(client) + 1));
  const stopFollowing =
    address.kind === "sentinel"
      ? followPrimarySwitches(
          client,
          () => nodeAddress(client),
          address.sentinels,
          address.masterName,
          options.sentinelPassword,
        )
      : undefined;
  reviveWhenEnded(client, () => stopFollowing?.());
  return client;
}

/**
 * ioredis ends a client for good when a disconnect cuts one of its reconnects short, which its
 * Sentinel failover detector does when +switch-master arrives mid-reconnect (seen once in ten
 * bench failovers: every command then failed with "Connection is closed."). A client that
 * ended without its owner's disconnect() or quit() connects again; `onOwnerClose` runs at
 * the owner's first.
 */
function reviveWhenEnded(client: Valkey, onOwnerClose: () => void): void {
  let closedByOwner = false;
  const closing = () => {
    if (closedByOwner) return;
    closedByOwner = true;
    onOwnerClose();
  };
  const disconnect = client.disconnect.bind(client);
  client.disconnect = (reconnect = false) => {
    if (!reconnect) closing();
    disconnect(reconnect);
  };
  const quit = client.quit.bind(client);
  client.quit = (callback?: Parameters<Valkey["quit"]>[0]) => {
    closing();
    return quit(callback);
  };
  client.on("end", () => {
    // A client whose owner turned retries off (the boot check's) stays ended.
    if (closedByOwner || typeof client.options.retryStrategy?.(1) !== "number") return;
    setTimeout(() => {
      if (!closedByOwner && client.status === "end") client.connect().catch(() => undefined);
    }, 250);
  });
}

function backoff(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(attempt, 6), 2000);
}

/**
 * Sentinel mode: every (re)connect asks the Sentinels for the primary and checks its role;
 * followPrimarySwitches (not ioredis's failoverDetector, see switch-detector.ts) drops the
 * connection on a +switch-master naming another primary, so a demoted primary is left at
 * once; a READONLY reply (a write that reached a demoted primary before that) drops it
 * too and fails the command, which the caller retries on the new primary.
 */
function sentinelOptions(
  address: Extract<ReturnType<typeof parseDatastoreAddress>, { kind: "sentinel" }>,
  sentinelPassword: string | undefined,
): RedisOptions {
  return {
    sentinels: address.sentinels,
    name: address.masterName,
    role: "master",
    ...(address.username === undefined ? {} : { username: address.username }),
    ...(address.password === undefined ? {} : { password: address.password }),
    ...(sentinelPassword ? { sentinelPassword } : {}),
    // Asking a Sentinel is cheap, and a promotion ends an outage at a moment no backoff
    // knows: reconnects are tried every 250 ms at most, so one follows it within that. The
    // first is at once: a switch or a demotion's CLIENT KILL drops a connection only once
    // the Sentinels name the new primary.
    retryStrategy: (attempt: number) => (attempt <= 1 ? 10 : Math.min(backoff(attempt), 250)),
    sentinelRetryStrategy: (attempt: number) => Math.min(backoff(attempt), 250),
    sentinelCommandTimeout: 1000,
    failoverDetector: false,
    reconnectOnError: (error) => (error.message.startsWith("READONLY") ? 1 : false),
  };
}

/**
 * Cluster mode: the partition's connection goes to its slot's primary (SlotOwnerConnector),
 * and a redirect reply drops it so that the next connect finds the slot's new owner; the
 * command that got it fails, and the caller retries it as after any lost connection.
 */
function clusterOptions(
  address: Extract<ReturnType<typeof parseDatastoreAddress>, { kind: "cluster" }>,
  slotKey: string | undefined,
): RedisOptions {
  return {
    Connector: SlotOwnerConnector,
    ...(address.username === undefined ? {} : { username: address.username }),
    ...(address.password === undefined ? {} : { password: address.password }),
    reconnectOnError: (error) => (isRedirect(error) ? 1 : false),
    // Read by SlotOwnerConnector; ioredis passes its options to the connector whole.
    // A connection tied to no partition (a report's server facts) goes to partition 0's shard.
    ...({ matchdCluster: { address, slotKey: slotKey ?? "{matching-p0}" } } as object),
  };
}

/**
 * The server at the other end of the connection, `ip:port`, as Sentinel names servers (an
 * IPv4-mapped address unmapped); undefined while it has no socket. Under Sentinel the URL does
 * not say which node a connection reached.
 */
export function nodeAddress(valkey: Valkey): string | undefined {
  const socket = (valkey as unknown as { stream?: { remoteAddress?: string; remotePort?: number } })
    .stream;
  if (socket?.remoteAddress === undefined || socket.remotePort === undefined) return undefined;
  return `${socket.remoteAddress.replace(/^::ffff:/, "")}:${socket.remotePort}`;
}

/** Replicas the server reports connected (INFO replication's connected_slaves). */
export async function connectedReplicas(valkey: Valkey): Promise<number> {
  return Number(parseInfo(await valkey.info("replication")).get("connected_slaves") ?? "0");
}

/** Parses a Redis INFO section into key/value pairs. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split("\r\n")) {
    const at = line.indexOf(":");
    if (at > 0 && !line.startsWith("#")) fields.set(line.slice(0, at), line.slice(at + 1));
  }
  return fields;
}

/** The error code ioredis puts first in a server reply error ("NOGROUP ...", "BUSYGROUP ..."). */
export function replyCode(error: unknown): string | undefined {
  if (error instanceof Error) return error.message.split(" ", 1)[0];
  return undefined;
}
