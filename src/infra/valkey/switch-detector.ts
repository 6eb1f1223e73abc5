/**
 * Follows Sentinel's +switch-master for one connection: drops it when a Sentinel names a
 * primary other than the one it is on, and only then. ioredis's own failover detector drops
 * it on every Sentinel's message; the Sentinels that learn of a switch from its leader
 * announce it up to a second later, so each of them cut a connection already on the new
 * primary, and every durability wait on it failed (a second stall after every handover).
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import Redis from "ioredis";
import type { SentinelAddress } from "./address";

const channel = "+switch-master";

/** The primary a +switch-master message names, when it is about `masterName`. */
export function switchedTo(
  message: string,
  masterName: string,
): { host: string; port: number } | undefined {
  // "<master name> <old ip> <old port> <new ip> <new port>"
  const [name, , , host, port] = message.split(" ");
  if (name !== masterName || host === undefined || port === undefined) return undefined;
  return { host, port: Number(port) };
}

/**
 * Whether `address` (the socket's `ip:port`, nodeAddress) is `target`, a name Sentinel
 * announces resolved when it is a host name.
 */
async function isTarget(address: string | undefined, target: { host: string; port: number }) {
  if (address === undefined) return false;
  const colon = address.lastIndexOf(":");
  const [ip, port] = [address.slice(0, colon), Number(address.slice(colon + 1))];
  if (port !== target.port) return false;
  if (ip === target.host) return true;
  if (isIP(target.host) !== 0) return false;
  const addresses = await lookup(target.host, { all: true }).catch(() => []);
  return addresses.some((a) => a.address === ip);
}

/**
 * Subscribes to +switch-master on every Sentinel and moves `client` when a switch names
 * another primary. A switch announced while the client (re)connects is checked once it is
 * ready: its connect may have asked a Sentinel before the switch. Returns the closer.
 */
export function followPrimarySwitches(
  client: Redis,
  /** The address the client's socket reaches now (nodeAddress). */
  addressOf: () => string | undefined,
  sentinels: readonly SentinelAddress[],
  masterName: string,
  sentinelPassword: string | undefined,
): () => void {
  let pending: { host: string; port: number } | undefined;
  const check = async (target: { host: string; port: number }) => {
    if (client.status !== "ready") {
      pending = target;
      return;
    }
    if (!(await isTarget(addressOf(), target))) client.disconnect(true);
  };
  const onReady = () => {
    const target = pending;
    pending = undefined;
    if (target !== undefined) void check(target);
  };
  client.on("ready", onReady);
  const subscribers = sentinels.map((sentinel) => {
    const subscriber = new Redis({
      host: sentinel.host,
      port: sentinel.port,
      ...(sentinelPassword ? { password: sentinelPassword } : {}),
      connectionName: "matchd-switch-detector",
      // A Sentinel down is retried quietly: the others announce the switch meanwhile.
      retryStrategy: () => 500,
      maxRetriesPerRequest: null,
    });
    subscriber.on("error", () => undefined);
    subscriber.subscribe(channel).catch(() => undefined);
    subscriber.on("message", (_channel: string, message: string) => {
      const target = switchedTo(message, masterName);
      if (target !== undefined) void check(target);
    });
    return subscriber;
  });
  return () => {
    client.off("ready", onReady);
    for (const subscriber of subscribers) subscriber.disconnect();
  };
}
