/**
 * The datastore URL's three forms: `redis://` (or `rediss://`) names one primary,
 * `redis+sentinel://[user:password@]host1:port1,host2:port2/<master-name>` names the Sentinels
 * that know which node is the primary now, and `redis+cluster://[user:password@]host1:port1,
 * host2:port2/` names seed nodes of a Valkey Cluster.
 */

export interface SentinelAddress {
  host: string;
  port: number;
}

/** A Valkey Cluster's seed nodes and the data nodes' credentials. */
export interface ClusterAddress {
  kind: "cluster";
  seeds: SentinelAddress[];
  username?: string;
  password?: string;
}

export type DatastoreAddress =
  | { kind: "direct"; url: string }
  | ClusterAddress
  | {
      kind: "sentinel";
      sentinels: SentinelAddress[];
      masterName: string;
      /** The data nodes' credentials; the Sentinels' password is MATCHING_SENTINEL_PASSWORD. */
      username?: string;
      password?: string;
    };

/** Sentinel's own default port, used when a host in the list names none. */
export const defaultSentinelPort = 26379;

const sentinelUrl = /^redis\+sentinel:\/\/(?:([^@/]*)@)?([^/?#@]+)\/([A-Za-z0-9._-]{1,128})$/;
const hostPort = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/;

/**
 * Reads a datastore URL, or returns why it is not one: anything other than a well-formed
 * Sentinel URL is handed to ioredis as it is (the config schema checks that form).
 */
export function parseDatastoreAddress(url: string): DatastoreAddress | string {
  if (url.startsWith("redis+cluster:")) return parseClusterAddress(url);
  if (!url.startsWith("redis+sentinel:")) return { kind: "direct", url };
  const match = sentinelUrl.exec(url);
  if (match === null)
    return "not redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>";
  const sentinels = parseHosts(match[2]!, defaultSentinelPort);
  if (typeof sentinels === "string") return sentinels;
  const address: DatastoreAddress = { kind: "sentinel", sentinels, masterName: match[3]! };
  return withCredentials(address, match[1]);
}

/** `host:port,host:port...`, a missing port read as `defaultPort`; or why not. */
function parseHosts(hosts: string, defaultPort: number): SentinelAddress[] | string {
  const parsed: SentinelAddress[] = [];
  for (const item of hosts.split(",")) {
    const parts = hostPort.exec(item);
    const port = Number(parts?.[2] ?? defaultPort);
    if (parts === null || port < 1 || port > 65535) return `"${item}" is not host:port`;
    parsed.push({ host: parts[1]!.replace(/^\[|\]$/g, ""), port });
  }
  return parsed;
}

/** The address with the URL's `user:password` (%-decoded) set on it; or why not. */
function withCredentials<T extends { username?: string; password?: string }>(
  address: T,
  credentials: string | undefined,
): T | string {
  if (credentials === undefined || credentials === "") return address;
  const at = credentials.indexOf(":");
  try {
    const user = decodeURIComponent(at < 0 ? credentials : credentials.slice(0, at));
    if (user !== "") address.username = user;
    if (at >= 0) address.password = decodeURIComponent(credentials.slice(at + 1));
  } catch {
    return "the credentials hold a malformed %-escape";
  }
  return address;
}

const clusterUrl = /^redis\+cluster:\/\/(?:([^@/]*)@)?([^/?#@]+)\/$/;

function parseClusterAddress(url: string): ClusterAddress | string {
  const match = clusterUrl.exec(url);
  if (match === null) return "not redis+cluster://[user:password@]host:port[,host:port...]/";
  const seeds = parseHosts(match[2]!, 6379);
  if (typeof seeds === "string") return seeds;
  return withCredentials<ClusterAddress>({ kind: "cluster", seeds }, match[1]);
}

/** True for a URL that names Sentinels or cluster seeds rather than one primary. */
export function isDiscoveryUrl(url: string): boolean {
  return url.startsWith("redis+sentinel:") || url.startsWith("redis+cluster:");
}
