/**
 * The one configuration schema shared by every matchd subcommand: each setting's
 * environment variable, flag, bounds and default, validated together so that a bad
 * configuration reports every problem at once.
 */
import { z } from "zod";
import { isDiscoveryUrl, parseDatastoreAddress } from "../infra/valkey/address";

/** "client": the client commands (order, book, result, events), which read the same settings. */
export type Subcommand = "conductor" | "outbox" | "feed" | "bench" | "check" | "stack" | "client";
export type DurabilityPolicy = "aof-replicated" | "memory";
export type LogLevel = "debug" | "info" | "warn" | "error";

export interface Config {
  datastoreUrl: string;
  /** "" when the Sentinels need no password (or the datastore URL names no Sentinels). */
  sentinelPassword: string;
  brokerUrl: string;
  partition: number;
  partitionCount: number;
  httpPort: number;
  httpHost: string;
  /** "" when none is set: the order and command queries are then open. */
  httpToken: string;
  commandMaxBytes: number;
  durability: DurabilityPolicy;
  durabilityTimeoutMs: number;
  /** How long a service waits at boot for a datastore it cannot reach now, then refuses. */
  bootWaitSeconds: number;
  batchMax: number;
  prefetch: number;
  dedupRetentionSeconds: number;
  expectedRate: number;
  outboxWindow: number;
  outboxReadCount: number;
  outboxClaimIdleMs: number;
  outboxLeaseTtlMs: number;
  /** Broker users whose `pair.halt` and `pair.resume` the conductor executes; empty: nobody's. */
  operatorUsers: readonly string[];
  /** Bytes a feed client may leave unsent before it is disconnected as too slow. */
  feedClientBufferBytes: number;
  /** Messages per pair and channel the feed keeps so a client can resume. */
  feedResumeMessages: number;
  feedMaxSubscriptions: number;
  logLevel: LogLevel;
}

/** The subcommands that run a process of matchd's own and read settings. */
export type SettingReader = "conductor" | "outbox" | "feed" | "check" | "bench";

/** The client commands, as `clientCommands` and the help name them. */
export const clientCommandNames = [
  "order place",
  "order cancel",
  "order amend",
  "order cancel-all",
  "order oco",
  "pair halt",
  "pair resume",
  "session cancel-after",
  "events",
  "book",
  "watch",
  "result",
] as const;
export type ClientCommandName = (typeof clientCommandNames)[number];

/** The client commands that publish a command: they need the broker and the partition count. */
const publishingClients = clientCommandNames.filter(
  (name) => name.startsWith("order ") || name.startsWith("pair ") || name.startsWith("session "),
);
/** The client commands that speak AMQP. */
const amqpClients = [...publishingClients, "events"] as const;

interface Setting<K extends keyof Config> {
  key: K;
  /**
   * The subcommands that read it. Its flag given to another is refused rather than ignored
   * (`conductor --window 5`); its variable stays accepted everywhere, since one environment
   * file commonly serves every process.
   */
  readBy: readonly SettingReader[];
  /** The client commands that read it (none unless said). */
  readByClients?: readonly ClientCommandName[];
  env: string;
  flag: string;
  accepted: string;
  schema: z.ZodType<Config[K]>;
  defaultFor: (subcommand: Subcommand) => string;
}

function integer(min: number, max: number): z.ZodType<number> {
  return z
    .string()
    .regex(/^\d+$/, "not a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
}

/**
 * A URL of one of `protocols` that names a host (a client would otherwise fall back to
 * localhost) and, when `path` is given, whose path matches it. The scheme must be written
 * in lower case at the very start: the URL parser lower-cases and trims it, but ioredis
 * turns TLS on only for a value that starts with "rediss://", so `REDISS://` would pass
 * here and then send the password in clear. `noQuery`: no query or fragment either, since
 * ioredis copies every query item over the client options matchd sets (its timeouts).
 */
function url(protocols: string[], path?: RegExp, noQuery = false): z.ZodType<string> {
  return z.string().refine((value) => {
    try {
      const parsed = new URL(value);
      return (
        protocols.includes(parsed.protocol) &&
        value.startsWith(`${parsed.protocol}//`) &&
        parsed.hostname !== "" &&
        (path === undefined || path.test(parsed.pathname)) &&
        (!noQuery || (!value.includes("?") && parsed.hash === ""))
      );
    } catch {
      return false;
    }
  }, "not a valid URL");
}

/** `direct` for one primary's URL, or a redis+sentinel:// URL that parses (parseDatastoreAddress). */
function datastoreUrlSchema(direct: z.ZodType<string>): z.ZodType<string> {
  return z.string().superRefine((value, context) => {
    if (!isDiscoveryUrl(value)) {
      const checked = direct.safeParse(value);
      if (!checked.success) context.addIssue({ code: "custom", message: "not a valid URL" });
      return;
    }
    const address = parseDatastoreAddress(value);
    if (typeof address === "string") context.addIssue({ code: "custom", message: address });
  });
}

/** One URL of `item`, or up to `max` of them, comma-separated. */
function urlList(item: z.ZodType<string>, max: number): z.ZodType<string> {
  return z.string().refine((value) => {
    const urls = value.split(",").map((u) => u.trim());
    return urls.length <= max && urls.every((u) => item.safeParse(u).success);
  }, "not a valid URL list");
}

const always =
  (value: string) =>
  (_subcommand: Subcommand): string =>
    value;

// Kept as a list rather than an object so the help text and error messages follow one order.
export const settings = [
  {
    key: "datastoreUrl",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    env: "MATCHING_DATASTORE_URL",
    flag: "--datastore-url",
    accepted:
      "a redis:// or rediss:// URL of the Valkey primary (scheme in lower case, host required; path empty or a database number; no query), or redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>, or a Valkey Cluster's seeds, redis+cluster://[user:password@]host:port[,host:port...]/",
    // The path can only be a database number: anything else would fail only at connect.
    schema: datastoreUrlSchema(url(["redis:", "rediss:"], /^(\/\d*)?$/, true)),
    defaultFor: always("redis://127.0.0.1:6379"),
  },
  {
    key: "sentinelPassword",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    env: "MATCHING_SENTINEL_PASSWORD",
    flag: "--sentinel-password",
    accepted: "the Sentinels' own password (the data nodes' is in the datastore URL); unset: none",
    schema: z.string().max(512, "longer than 512 characters"),
    defaultFor: always(""),
  },
  {
    key: "brokerUrl",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    readByClients: amqpClients,
    env: "MATCHING_BROKER_URL",
    flag: "--broker-url",
    accepted:
      "an amqp:// or amqps:// URL (scheme in lower case, host required; the vhost is its path), or up to 9 of one cluster's nodes, comma-separated",
    schema: urlList(url(["amqp:", "amqps:"]), 9),
    defaultFor: always("amqp://guest:guest@127.0.0.1:5672"),
  },
  {
    key: "partition",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    readByClients: ["order cancel-all", "session cancel-after"],
    env: "MATCHING_PARTITION",
    flag: "--partition",
    accepted:
      "an integer 0..1023, below the partition count, or ordinal: the number that ends the host name (matchd-conductor-3 runs partition 3)",
    schema: integer(0, 1023),
    defaultFor: always("0"),
  },
  {
    key: "partitionCount",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    readByClients: publishingClients,
    env: "MATCHING_PARTITION_COUNT",
    flag: "--partition-count",
    accepted: "an integer 1..1024",
    schema: integer(1, 1024),
    defaultFor: always("1"),
  },
  {
    key: "httpPort",
    readBy: ["conductor", "outbox", "feed"],
    env: "MATCHING_HTTP_PORT",
    flag: "--http-port",
    accepted: "a TCP port 0..65535 (0 picks a free one)",
    schema: integer(0, 65535),
    defaultFor: (subcommand) =>
      subcommand === "outbox" ? "3035" : subcommand === "feed" ? "3040" : "3002",
  },
  {
    key: "httpHost",
    readBy: ["conductor", "outbox", "feed"],
    env: "MATCHING_HTTP_HOST",
    flag: "--http-host",
    accepted: "the address HTTP binds: an IPv4 or IPv6 address, or a host name",
    // Loopback by default: the queries hand out users' orders, and a laptop's services need
    // no other interface. The container image sets 0.0.0.0, since its port is published.
    schema: z
      .string()
      .regex(/^([0-9a-fA-F:.]+|[A-Za-z0-9]([A-Za-z0-9.-]{0,252}))$/, "not an address or host name"),
    defaultFor: always("127.0.0.1"),
  },
  {
    key: "httpToken",
    readBy: ["conductor", "bench"],
    readByClients: ["result"],
    env: "MATCHING_HTTP_TOKEN",
    flag: "--http-token",
    accepted:
      "a bearer token of 16..256 visible ASCII characters that GET /orders and /commands require (unset: no token)",
    schema: z
      .string()
      .refine(
        (v) => v === "" || /^[\x21-\x7e]{16,256}$/.test(v),
        "not 16..256 visible ASCII characters",
      ),
    defaultFor: always(""),
  },
  {
    key: "commandMaxBytes",
    readBy: ["conductor", "bench"],
    env: "MATCHING_COMMAND_MAX_BYTES",
    flag: "--command-max-bytes",
    accepted:
      "bytes 1024..1048576: a larger command message is dead-lettered without being decoded",
    // The largest valid command (every id at its limit, every optional field, superjson's
    // wrapper) takes 1,922 bytes; a few KiB above it leaves room for producers' extra fields.
    schema: integer(1024, 1_048_576),
    defaultFor: always("8192"),
  },
  {
    key: "durability",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    env: "MATCHING_DURABILITY",
    flag: "--durability",
    accepted: "aof-replicated or memory",
    schema: z.enum(["aof-replicated", "memory"]),
    defaultFor: always("aof-replicated"),
  },
  {
    key: "durabilityTimeoutMs",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    env: "MATCHING_DURABILITY_TIMEOUT_MS",
    flag: "--durability-timeout-ms",
    accepted: "milliseconds 10..60000",
    schema: integer(10, 60_000),
    defaultFor: always("2000"),
  },
  {
    key: "bootWaitSeconds",
    readBy: ["conductor", "outbox", "feed"],
    env: "MATCHING_BOOT_WAIT_S",
    flag: "--boot-wait-s",
    accepted: "seconds 1..86400 a service waits at boot for a datastore it cannot reach now",
    schema: integer(1, 86_400),
    defaultFor: always("300"),
  },
  {
    key: "batchMax",
    readBy: ["conductor", "bench"],
    env: "MATCHING_BATCH_MAX",
    flag: "--batch-max",
    accepted: "commands per commit 1..10000 (1 = one command per commit)",
    schema: integer(1, 10_000),
    defaultFor: always("500"),
  },
  {
    key: "prefetch",
    readBy: ["conductor", "bench"],
    env: "MATCHING_PREFETCH",
    flag: "--prefetch",
    accepted: "unacknowledged commands in flight 1..20000",
    schema: integer(1, 20_000),
    defaultFor: always("2000"),
  },
  {
    key: "dedupRetentionSeconds",
    readBy: ["conductor", "check", "bench"],
    env: "MATCHING_DEDUP_RETENTION_S",
    flag: "--dedup-retention-s",
    accepted: "seconds 60..31536000 that dedup markers and stored results are kept",
    // An hour: past broker redeliveries (seconds to minutes) and a producer's retry of a lost
    // acknowledgement (minutes), at a cost that stays bounded: 320 B a command, 2.3 GB at
    // 2,000 commands/s (dedup-sizing.ts). A command held unacknowledged renews its markers at
    // each redelivery, so a replica outage cannot outlast them. Shorter is allowed (a soak
    // crosses it) and warned about at boot (checkDedupSizing).
    schema: integer(60, 31_536_000),
    defaultFor: always("3600"),
  },
  {
    key: "expectedRate",
    readBy: ["conductor", "check", "bench"],
    env: "MATCHING_EXPECTED_RATE",
    flag: "--expected-rate",
    accepted: "commands/s 1..1000000 the partition must sustain, for the memory estimate",
    schema: integer(1, 1_000_000),
    defaultFor: always("2000"),
  },
  {
    key: "outboxWindow",
    readBy: ["outbox", "bench"],
    env: "MATCHING_OUTBOX_WINDOW",
    flag: "--window",
    accepted: "events awaiting a broker confirm 1..20000 (1 = publish and await each)",
    schema: integer(1, 20_000),
    defaultFor: always("2000"),
  },
  {
    key: "outboxReadCount",
    readBy: ["outbox", "bench"],
    env: "MATCHING_OUTBOX_READ_COUNT",
    flag: "--read-count",
    accepted: "stream entries per read 1..5000",
    schema: integer(1, 5000),
    defaultFor: always("500"),
  },
  {
    key: "outboxClaimIdleMs",
    readBy: ["outbox", "bench"],
    env: "MATCHING_OUTBOX_CLAIM_IDLE_MS",
    flag: "--claim-idle-ms",
    accepted: "milliseconds 100..3600000 before another consumer's pending entries are claimed",
    schema: integer(100, 3_600_000),
    // The lease, not this wait, keeps a former holder from publishing: by the time a standby
    // holds the lease (a TTL after the holder's last renewal), what the holder read is older
    // than this. The wait only gives a former holder's late read time to land first.
    defaultFor: always("1000"),
  },
  {
    key: "outboxLeaseTtlMs",
    readBy: ["outbox", "bench"],
    env: "MATCHING_OUTBOX_LEASE_TTL_MS",
    flag: "--lease-ttl-ms",
    accepted: "milliseconds 1000..600000 of the outbox publishing lease",
    schema: integer(1000, 600_000),
    defaultFor: always("10000"),
  },
  {
    key: "operatorUsers",
    readBy: ["conductor"],
    env: "MATCHING_OPERATOR_USERS",
    flag: "--operator-users",
    accepted:
      "broker user names, comma-separated, whose pair.halt and pair.resume are executed (the message's AMQP user-id, which the broker checks); unset: nobody's",
    // The broker refuses a publish whose user-id is not its connection's own user, so the
    // property names who sent the command; an empty list leaves every pair command refused.
    schema: z
      .string()
      .transform((value) =>
        value
          .split(",")
          .map((name) => name.trim())
          .filter((name) => name !== ""),
      )
      .pipe(
        z
          .array(z.string().regex(/^[^\s,]{1,255}$/, "a user name of 1..255 characters, no spaces"))
          .max(100, "more than 100 users"),
      ),
    defaultFor: always(""),
  },
  {
    key: "feedClientBufferBytes",
    readBy: ["feed"],
    env: "MATCHING_FEED_CLIENT_BUFFER_BYTES",
    flag: "--client-buffer-bytes",
    accepted: "bytes 65536..67108864 a feed client may leave unread before it is cut off",
    // A megabyte is seconds of a busy pair's deltas: a client that far behind is not reading.
    schema: integer(65_536, 67_108_864),
    defaultFor: always("1048576"),
  },
  {
    key: "feedResumeMessages",
    readBy: ["feed"],
    env: "MATCHING_FEED_RESUME_MESSAGES",
    flag: "--resume-messages",
    accepted: "messages 0..100000 per pair and channel a client may resume from",
    schema: integer(0, 100_000),
    defaultFor: always("1000"),
  },
  {
    key: "feedMaxSubscriptions",
    readBy: ["feed"],
    env: "MATCHING_FEED_MAX_SUBSCRIPTIONS",
    flag: "--max-subscriptions",
    accepted: "subscriptions 1..1000 one feed connection may hold",
    schema: integer(1, 1000),
    defaultFor: always("50"),
  },
  {
    key: "logLevel",
    readBy: ["conductor", "outbox", "feed", "check", "bench"],
    env: "MATCHING_LOG_LEVEL",
    flag: "--log-level",
    accepted: "debug, info, warn or error",
    schema: z.enum(["debug", "info", "warn", "error"]),
    defaultFor: always("info"),
  },
] as const satisfies readonly Setting<keyof Config>[];

export const configFlags: ReadonlySet<string> = new Set(settings.map((setting) => setting.flag));
