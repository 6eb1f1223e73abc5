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
  const credentials = match[1];
  const hosts = match[2]!;
  const masterName = match[3]!;
  const sentinels: SentinelAddress[] = [];
  for (const item of hosts.split(",")) {
    const parts = hostPort.exec(item);
    const port = Number(parts?.[2] ?? defaultSentinelPort);
    if (parts === null || port < 1 || port > 65535) return `"${item}" is not host:port`;
    sentinels.push({ host: parts[1]!.replace(/^\[|\]$/g, ""), port });
  }
  const address: DatastoreAddress = { kind: "sentinel", sentinels, masterName };
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

/** True for a URL that names Sentinels rather than one primary. */
export function isSentinelUrl(url: string): boolean {
  return url.startsWith("redis+sentinel:");
}

const clusterUrl = /^redis\+cluster:\/\/(?:([^@/]*)@)?([^/?#@]+)\/$/;

function parseClusterAddress(url: string): ClusterAddress | string {
  const match = clusterUrl.exec(url);
  if (match === null) return "not redis+cluster://[user:password@]host:port[,host:port...]/";
  const seeds: SentinelAddress[] = [];
  for (const item of match[2]!.split(",")) {
    const parts = hostPort.exec(item);
    const port = Number(parts?.[2] ?? 6379);
    if (parts === null || port < 1 || port > 65535) return `"${item}" is not host:port`;
    seeds.push({ host: parts[1]!.replace(/^\[|\]$/g, ""), port });
  }
  const address: ClusterAddress = { kind: "cluster", seeds };
  const credentials = match[1];
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

/** True for a URL that names Sentinels or cluster seeds rather than one primary. */
export function isDiscoveryUrl(url: string): boolean {
  return url.startsWith("redis+sentinel:") || url.startsWith("redis+cluster:");
}
