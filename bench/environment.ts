// Describes where a benchmark ran, read from the machine and from the servers themselves
// (not from our own config), so a figure can be placed; every probe is bounded and any
// failure becomes "unknown" with the reason instead of failing the run.

import { readFileSync, realpathSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import amqp from "amqplib";
import { brokerUrls } from "../src/infra/amqp/broker-urls";
import { redactUrl } from "../src/infra/redact";
import { createValkey, parseInfo } from "../src/infra/valkey/client";

/** One observed fact: its value, or "unknown" plus why it could not be read. */
export interface Fact {
  value: string;
  reason?: string;
}

export interface DatastoreEnvironment {
  /** The URL with any password removed. */
  url: string;
  version: Fact;
  appendonly: Fact;
  appendfsync: Fact;
  hz: Fact;
  /** auto-aof-rewrite-percentage: how far the AOF grows past its last rewrite before the next. */
  rewritePercentage: Fact;
  role: Fact;
  connectedReplicas: Fact;
  /** The server's data directory (CONFIG GET dir). */
  dataDir: Fact;
  /** Filesystem type of dataDir; only meaningful when the server runs on this host. */
  filesystem: Fact;
}

export interface BrokerEnvironment {
  url: string;
  product: Fact;
  version: Fact;
}

export interface Environment {
  cpuModel: Fact;
  cores: number;
  totalMemoryBytes: number;
  kernel: string;
  distribution: Fact;
  bun: string;
  datastore?: DatastoreEnvironment;
  broker?: BrokerEnvironment;
}

/** Each probe of a server gets this long; a stalled server must not stall the report. */
const probeTimeoutMs = 2000;

const unknown = (reason: string): Fact => ({ value: "unknown", reason });
const known = (value: string): Fact => ({ value });

export async function collectEnvironment(options: {
  datastoreUrl?: string;
  brokerUrl?: string;
}): Promise<Environment> {
  const [datastore, broker] = await Promise.all([
    options.datastoreUrl === undefined ? undefined : probeDatastore(options.datastoreUrl),
    options.brokerUrl === undefined ? undefined : probeBroker(options.brokerUrl),
  ]);
  return {
    ...machineEnvironment(),
    ...(datastore === undefined ? {} : { datastore }),
    ...(broker === undefined ? {} : { broker }),
  };
}

/** The machine alone (no servers probed), synchronously, for in-process benchmarks. */
export function machineEnvironment(): Environment {
  const list = cpus();
  return {
    cpuModel: cpuModel(list[0]?.model),
    cores: list.length,
    totalMemoryBytes: totalmem(),
    kernel: release(),
    distribution: osPrettyName(),
    bun: typeof Bun === "undefined" ? "not bun" : Bun.version,
  };
}

/**
 * A flat, ordered list of label/value pairs for reports (terminal, JSON `extra`, HTML);
 * an unknown value carries its reason so a reader sees why it is missing.
 */
export function environmentFacts(environment: Environment): [string, string][] {
  const show = (fact: Fact) =>
    fact.reason === undefined ? fact.value : `unknown (${fact.reason})`;
  const rows: [string, string][] = [
    ["cpu", `${show(environment.cpuModel)} x${environment.cores}`],
    ["memory", `${(environment.totalMemoryBytes / 2 ** 30).toFixed(1)} GiB`],
    ["os", `${show(environment.distribution)}, kernel ${environment.kernel}`],
    ["bun", environment.bun],
  ];
  const d = environment.datastore;
  if (d !== undefined && d.version.reason?.startsWith("cannot connect") === true) {
    rows.push(["valkey", `unknown at ${d.url} (${d.version.reason})`]);
  } else if (d !== undefined) {
    rows.push(
      ["valkey", `${show(d.version)} at ${d.url}`],
      ["valkey role", `${show(d.role)}, connected replicas ${show(d.connectedReplicas)}`],
      [
        "valkey aof",
        `appendonly ${show(d.appendonly)}, appendfsync ${show(d.appendfsync)}, auto-aof-rewrite-percentage ${show(d.rewritePercentage)}`,
      ],
      ["valkey hz", show(d.hz)],
      ["valkey data dir", `${show(d.dataDir)} (filesystem ${show(d.filesystem)})`],
    );
  }
  const b = environment.broker;
  if (b !== undefined && b.version.reason !== undefined && b.product.reason !== undefined) {
    rows.push(["broker", `unknown at ${b.url} (${b.version.reason})`]);
  } else if (b !== undefined) {
    rows.push(["broker", `${show(b.product)} ${show(b.version)} at ${b.url}`]);
  }
  return rows;
}

/**
 * The mount holding `path` (longest mount-point prefix in /proc/self/mounts), e.g.
 * "ext4 /dev/sda1 on /"; tmpfs or overlay here means the fsync figures say nothing
 * about a real disk.
 */
function filesystemOf(path: string): Fact {
  let target: string;
  let mounts: string;
  try {
    target = realpathSync(path);
    mounts = readFileSync("/proc/self/mounts", "utf8");
  } catch (error) {
    return unknown(messageOf(error));
  }
  let best: { mountPoint: string; type: string; device: string } | undefined;
  for (const line of mounts.split("\n")) {
    const [device, rawMountPoint, type] = line.split(" ");
    if (device === undefined || rawMountPoint === undefined || type === undefined) continue;
    // /proc/self/mounts escapes spaces and other bytes as octal (\040).
    const mountPoint = rawMountPoint.replace(/\\([0-7]{3})/g, (_, octal: string) =>
      String.fromCharCode(Number.parseInt(octal, 8)),
    );
    const inside =
      mountPoint === "/" || target === mountPoint || target.startsWith(`${mountPoint}/`);
    if (inside && (best === undefined || mountPoint.length >= best.mountPoint.length)) {
      best = { mountPoint, type, device };
    }
  }
  return best === undefined
    ? unknown(`no mount found for ${target}`)
    : known(`${best.type} ${best.device} on ${best.mountPoint}`);
}

function cpuModel(fromOs: string | undefined): Fact {
  if (fromOs !== undefined && fromOs !== "" && fromOs !== "unknown") return known(fromOs);
  // Some virtual machines and arm64 kernels leave os.cpus() blank; /proc/cpuinfo may still say.
  try {
    const info = readFileSync("/proc/cpuinfo", "utf8");
    const match = /^(?:model name|Hardware|Processor|cpu model)\s*:\s*(.+)$/m.exec(info);
    if (match?.[1] !== undefined) return known(match[1].trim());
    return unknown("no model line in /proc/cpuinfo");
  } catch (error) {
    return unknown(messageOf(error));
  }
}

function osPrettyName(): Fact {
  try {
    const text = readFileSync("/etc/os-release", "utf8");
    const match = /^PRETTY_NAME=(.*)$/m.exec(text);
    if (match?.[1] === undefined) return unknown("no PRETTY_NAME in /etc/os-release");
    return known(match[1].replace(/^"(.*)"$/, "$1"));
  } catch (error) {
    return unknown(messageOf(error));
  }
}

async function probeDatastore(url: string): Promise<DatastoreEnvironment> {
  const base = { url: redactUrl(url) };
  const valkey = createValkey(url, { name: "matchd-bench-environment", lazy: true });
  // Kept so the report names the socket error rather than ioredis's "Connection is closed".
  let lastError: unknown;
  valkey.on("error", (error: unknown) => {
    lastError = error;
  });
  try {
    await bounded(valkey.connect(), "connect");
  } catch (error) {
    valkey.disconnect();
    const fact = unknown(`cannot connect: ${messageOf(lastError ?? error)}`);
    return {
      ...base,
      version: fact,
      appendonly: fact,
      appendfsync: fact,
      hz: fact,
      rewritePercentage: fact,
      role: fact,
      connectedReplicas: fact,
      dataDir: fact,
      filesystem: fact,
    };
  }
  try {
    const [server, replication, appendonly, appendfsync, hz, rewritePercentage, dir] =
      await Promise.all([
        probe(async () => parseInfo(await valkey.info("server")), "INFO server"),
        probe(async () => parseInfo(await valkey.info("replication")), "INFO replication"),
        configGet(valkey, "appendonly"),
        configGet(valkey, "appendfsync"),
        configGet(valkey, "hz"),
        configGet(valkey, "auto-aof-rewrite-percentage"),
        configGet(valkey, "dir"),
      ]);
    const field = (section: Map<string, string> | Fact, names: string[], label: string): Fact => {
      if (!(section instanceof Map)) return section;
      for (const name of names) {
        const value = section.get(name);
        if (value !== undefined) return known(value);
      }
      return unknown(`${label} has no ${names.join(" or ")}`);
    };
    const local = /^redis:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(url);
    let filesystem: Fact;
    if (dir.reason !== undefined) filesystem = dir;
    else if (local) filesystem = filesystemOf(dir.value);
    else filesystem = unknown("the datastore is not on this host");
    return {
      ...base,
      version: field(server, ["valkey_version", "redis_version"], "INFO server"),
      appendonly,
      appendfsync,
      hz,
      rewritePercentage,
      role: field(replication, ["role"], "INFO replication"),
      connectedReplicas: field(replication, ["connected_slaves"], "INFO replication"),
      dataDir: dir,
      filesystem,
    };
  } finally {
    valkey.disconnect();
  }
}

async function configGet(valkey: ReturnType<typeof createValkey>, name: string): Promise<Fact> {
  const reply = await probe(
    async () => (await valkey.config("GET", name)) as string[],
    `CONFIG GET ${name}`,
  );
  if (!Array.isArray(reply)) return reply;
  // A managed datastore may rename or forbid CONFIG; an empty reply is reported, not guessed.
  const value = reply[1];
  return value === undefined ? unknown(`CONFIG GET ${name} returned nothing`) : known(value);
}

async function probeBroker(url: string): Promise<BrokerEnvironment> {
  const base = { url: redactUrl(url) };
  // A cluster's node list: the first node stands for the cluster's version and settings.
  const connecting = amqp.connect(brokerUrls(url)[0] ?? url, {
    timeout: probeTimeoutMs,
    clientProperties: { connection_name: "matchd-bench-environment" },
  });
  try {
    const model = await bounded(connecting, "connect");
    try {
      const properties = model.connection.serverProperties;
      const version = properties.version;
      const product = properties.product;
      return {
        ...base,
        product: typeof product === "string" ? known(product) : unknown("no product property"),
        version: typeof version === "string" ? known(version) : unknown("no version property"),
      };
    } finally {
      await bounded(model.close(), "close").catch(() => {});
    }
  } catch (error) {
    // A handshake that finishes after the deadline must still be closed, not leaked.
    connecting.then(
      (late) => late.close().catch(() => {}),
      () => {},
    );
    const fact = unknown(`cannot connect: ${messageOf(error)}`);
    return { ...base, product: fact, version: fact };
  }
}

/** Runs one probe step; a failure becomes an unknown Fact naming the step. */
async function probe<T>(step: () => Promise<T>, label: string): Promise<T | Fact> {
  try {
    return await bounded(step(), label);
  } catch (error) {
    return unknown(`${label} failed: ${messageOf(error)}`);
  }
}

function bounded<T>(promise: Promise<T>, label: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${label} took longer than ${probeTimeoutMs} ms`)),
      probeTimeoutMs,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
