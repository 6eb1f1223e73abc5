/**
 * The durability policy against a real datastore: the boot checks that decide whether
 * `aof-replicated` can be honoured, and the per-commit durability wait.
 */

import { ReplyError } from "ioredis";
import type { DurabilityPolicy } from "../../config/schema";
import { withinMs } from "../within";
import { connectionGeneration, nodeAddress, parseInfo, type Valkey } from "./client";
import {
  checkPrimaryFsync,
  checkReplicasFsync,
  type ListedReplica,
  listedReplicas,
} from "./fsync-policy";
import { luaScript, runScript } from "./lua-script";
import { defaultReplicaLagLimitS, requiredReplicaFsyncs } from "./replica-rule";

/**
 * Sets a small marker key with a TTL (KEYS[1]; ARGV[1] = value, ARGV[2] = TTL in ms): a write
 * that is always propagated, so a WAITAOF after it on the same connection has something to
 * cover. The boot check's probe and the outbox's read barrier. Flagged allow-oom: a datastore
 * at maxmemory with noeviction refuses a plain SET, which would keep a service from booting
 * (a crash loop) and the outbox, the one process that frees memory there, from draining.
 */
export const markerWriteScript = luaScript(
  "marker-write",
  `#!lua flags=allow-oom
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`,
);

export interface CheckOutcome {
  name: string;
  ok: boolean;
  detail: string;
  /**
   * Only on a failed reachability check: true when the server did not answer (down, or not
   * there yet), false when it answered with an error (a wrong password, a denied command),
   * which waiting does not mend.
   */
  retryable?: boolean;
  /**
   * A passed check that could not see everything it looks at (a replica that cannot be asked
   * at its listed address): printed as WARN and logged as a warning, never a refusal.
   */
  warning?: boolean;
}

export class DurabilityTimeoutError extends Error {
  readonly code = "DURABILITY_TIMEOUT";
  constructor(
    readonly waitedMs: number,
    readonly local: number,
    readonly replicas: number,
    readonly required = 1,
  ) {
    super(
      `durability not confirmed within ${waitedMs} ms (local fsyncs ${local}, replica fsyncs ${replicas} of ${required} needed)`,
    );
  }
}

/** The primary's fsync setting no longer honours the policy (see FsyncPolicyWatch). */
export class PolicyViolatedError extends Error {
  readonly code = "POLICY_VIOLATED";
  constructor(reason: string) {
    super(`durability policy no longer holds: ${reason}`);
  }
}

/** A durability wait its caller gave up on (a shutdown): nothing is known about durability. */
export class WaitAbandonedError extends Error {
  constructor() {
    super("durability wait abandoned");
  }
}

/** The first check's name: the others run only when it passed. */
export const datastoreReachableCheck = "datastore reachable";

/** INFO answered: the server's version, or the failed check (retryable unless it replied). */
async function checkReachable(
  valkey: Valkey,
): Promise<{ outcome: CheckOutcome; version?: string }> {
  try {
    const server = parseInfo(await valkey.info("server"));
    const version = server.get("valkey_version") ?? server.get("redis_version") ?? "0";
    return {
      outcome: { name: datastoreReachableCheck, ok: true, detail: "INFO answered" },
      version,
    };
  } catch (error) {
    return {
      outcome: {
        name: datastoreReachableCheck,
        ok: false,
        detail: `cannot reach the datastore (${(error as Error).message}); start Valkey or fix MATCHING_DATASTORE_URL`,
        retryable: !(error instanceof ReplyError),
      },
    };
  }
}

/**
 * Both policies: the outbox's writes that must go through at maxmemory are scripts that
 * declare flags (`#!lua flags=allow-oom`), which older servers cannot compile.
 */
function checkScriptFlags(version: string): CheckOutcome {
  const ok = Number.parseInt(version, 10) >= 7;
  return {
    name: "script flags supported",
    ok,
    detail: ok
      ? `server ${version} runs scripts with flags`
      : `server ${version} cannot run scripts with flags (needs Redis/Valkey >= 7.0); install valkey-server >= 7.2 (Debian 12: bookworm-backports)`,
  };
}

/**
 * A check whose own command failed (renamed, or denied by ACL, say) is a failed check, so the
 * process refuses with exit 3 and the reason instead of crashing, and the checks after it still
 * run: the refusal lists every problem at once.
 */
function couldNotCheck(name: string, error: unknown): CheckOutcome {
  return { name, ok: false, detail: `could not be checked: ${(error as Error).message}` };
}

async function checkWaitAof(valkey: Valkey, version: string): Promise<CheckOutcome> {
  const name = "WAITAOF supported";
  try {
    const ok = await commandExists(valkey, "waitaof");
    return {
      name,
      ok,
      detail: ok
        ? `server ${version} has WAITAOF`
        : `server ${version} has no WAITAOF (needs Redis/Valkey >= 7.2); install valkey-server >= 7.2 (Debian 12: bookworm-backports)`,
    };
  } catch (error) {
    return couldNotCheck(name, error);
  }
}

/** What INFO replication says: the role, the replicas listed (none when it could not be read). */
interface ReplicationSeen {
  outcome: CheckOutcome;
  role: string;
  connected: number;
  listed: ListedReplica[];
  /** The error of INFO replication, when it could not be read. */
  error?: unknown;
}

async function checkReplication(valkey: Valkey): Promise<ReplicationSeen> {
  const name = "primary role";
  try {
    const info = parseInfo(await valkey.info("replication"));
    const role = info.get("role") ?? "unknown";
    const ok = role === "master";
    const what = role === "slave" ? "replica" : role;
    return {
      outcome: {
        name,
        ok,
        detail: ok
          ? "server is a primary"
          : `server is a ${what}, not a primary; point MATCHING_DATASTORE_URL at the primary`,
      },
      role,
      connected: Number(info.get("connected_slaves") ?? "0"),
      listed: listedReplicas(info),
    };
  } catch (error) {
    return {
      outcome: couldNotCheck(name, error),
      role: "unknown",
      connected: 0,
      listed: [],
      error,
    };
  }
}

/** INFO persistence rather than CONFIG GET: it answers where CONFIG is denied. */
async function checkAppendOnly(valkey: Valkey): Promise<CheckOutcome> {
  const name = "appendonly on";
  try {
    const ok = parseInfo(await valkey.info("persistence")).get("aof_enabled") === "1";
    return {
      name,
      ok,
      detail: ok
        ? "appendonly yes"
        : "appendonly is off; set `appendonly yes` (and appendfsync always) on primary and replica",
    };
  } catch (error) {
    return couldNotCheck(name, error);
  }
}

/** Unread replication info says nothing about replicas: no advice to start one then. */
function checkReplicaConnected(replication: ReplicationSeen): CheckOutcome {
  const name = "replica connected";
  if (replication.error !== undefined) return couldNotCheck(name, replication.error);
  const n = replication.connected;
  return {
    name,
    ok: n >= 1,
    detail:
      n >= 1
        ? `${n} replica(s) connected`
        : "no replica is connected; start a replica with `replicaof <primary>` and appendonly yes",
  };
}

/**
 * The probe: a marker written and waited for as every commit is (the same sliced wait), on
 * every healthy replica, as every commit's wait will need (replica-rule.ts).
 */
async function probeWrite(
  valkey: Valkey,
  probeKey: string,
  timeoutMs: number,
  listed: ListedReplica[],
  lagLimitS: number,
): Promise<CheckOutcome> {
  const name = "probe write fsynced on primary and replica";
  const required = requiredReplicaFsyncs(listed, lagLimitS);
  try {
    const waitedMs = await writeMarkerAndWaitDurable(valkey, probeKey, timeoutMs, {
      replicasRequired: () => required,
    });
    return {
      name,
      ok: true,
      detail: `WAITAOF 1 ${required} confirmed the fsync of the primary and ${required} replica(s) in ${waitedMs.toFixed(1)} ms (limit ${timeoutMs} ms)`,
    };
  } catch (error) {
    const detail =
      error instanceof DurabilityTimeoutError
        ? `${error.message}; the replica needs appendonly yes and a healthy link`
        : `probe failed: ${(error as Error).message}`;
    return { name, ok: false, detail };
  }
}

/**
 * Runs the checks that `aof-replicated` requires, each reported on its own. Under
 * `memory` only reachability is checked. Never throws for a failed check.
 */
export async function checkDatastore(
  valkey: Valkey,
  policy: DurabilityPolicy,
  timeoutMs: number,
  probeKey: string,
  /** How old a replica's last acknowledgement may be for the probe to wait for it. */
  lagLimitS = defaultReplicaLagLimitS,
): Promise<CheckOutcome[]> {
  const reached = await checkReachable(valkey);
  if (reached.version === undefined) return [reached.outcome];
  const scriptFlags = checkScriptFlags(reached.version);
  const outcomes = [reached.outcome, scriptFlags, await checkNoEviction(valkey, policy)];
  if (policy === "memory") return outcomes;
  const waitAof = await checkWaitAof(valkey, reached.version);
  const replication = await checkReplication(valkey);
  const appendOnly = await checkAppendOnly(valkey);
  outcomes.push(waitAof, replication.outcome, appendOnly, await checkPrimaryFsync(valkey));
  outcomes.push(checkReplicaConnected(replication));
  outcomes.push(...(await checkReplicasFsync(valkey, replication.listed)));
  // The probe is a flagged script: it needs every check above, script flags included.
  const probeable =
    scriptFlags.ok &&
    waitAof.ok &&
    replication.role === "master" &&
    appendOnly.ok &&
    replication.connected >= 1;
  outcomes.push(
    probeable
      ? await probeWrite(valkey, probeKey, timeoutMs, replication.listed, lagLimitS)
      : {
          name: "probe write fsynced on primary and replica",
          ok: false,
          detail: "skipped: an earlier check failed",
        },
  );
  return outcomes;
}

/**
 * Writes a marker (markerWriteScript, PX 60 s) and waits until primary and replica fsynced
 * it: everything the server applied before the marker is then durable too, whichever
 * connection wrote it (the AOF and the replication stream are ordered). Returns the wait's
 * milliseconds; throws as waitDurable does (ConnectionChangedError when the marker and the
 * wait did not share one physical connection).
 */
export async function writeMarkerAndWaitDurable(
  valkey: Valkey,
  key: string,
  timeoutMs: number,
  rule: DurabilityRule = {},
  /** The connection the writes to cover went out on, when they came before the marker. */
  writtenOn = connectionGeneration(valkey),
): Promise<number> {
  await runScript(valkey, markerWriteScript, [key], [String(Date.now()), 60_000]);
  return waitDurable(valkey, timeoutMs, { writtenOn, ...rule });
}

/** What a durability wait asks of the watch (FsyncPolicyWatch); every part optional. */
export interface DurabilityRule {
  /** Why the policy no longer holds: a wait then never succeeds. */
  violation?: () => string | undefined;
  /** Replica fsyncs the wait needs, read before every slice (replica-rule.ts); 1 by default. */
  replicasRequired?: () => number;
  /** The server the replica count is for: a wait that ran on another one does not count. */
  watchedNode?: () => string | undefined;
  /** Resolves when the watch next lifts a hold on every wait: a retry can start at once. */
  holdLifted?: () => Promise<void>;
  /**
   * Why the Sentinels' view forbids acknowledging on this primary (a failover under way, or
   * another primary named): a write now can only fail its wait, and it makes the old primary
   * diverge further from the one they promote.
   */
  sentinelsForbid?: () => string | undefined;
}

async function commandExists(valkey: Valkey, name: string): Promise<boolean> {
  const info = (await valkey.call("COMMAND", "INFO", name)) as unknown[];
  return Array.isArray(info) && info[0] !== null && info[0] !== undefined;
}

async function waitAof(
  valkey: Valkey,
  replicas: number,
  timeoutMs: number,
): Promise<[number, number]> {
  const reply = (await valkey.call("WAITAOF", "1", String(replicas), String(timeoutMs))) as [
    number,
    number,
  ];
  return [Number(reply[0]), Number(reply[1])];
}

// A short WAITAOF slice: a replica's fsync acknowledgement can otherwise wait for its
// once-a-second report; re-asking in short slices lets the next REPLCONF ACK through.
const waitSliceMs = 2;

/** The connection was re-established between the writes a wait was to cover and its end. */
export class ConnectionChangedError extends Error {
  constructor(
    what = "the datastore connection was re-established between the writes and their durability wait",
  ) {
    super(what);
  }
}

/** Resolves (to undefined) at the connection's next 'ready'; cancel() stops listening. */
function nextReady(valkey: Valkey): { promise: Promise<undefined>; cancel: () => void } {
  let onReady = (): void => undefined;
  const promise = new Promise<undefined>((resolve) => {
    onReady = () => resolve(undefined);
    valkey.once("ready", onReady);
  });
  return { promise, cancel: () => valkey.off("ready", onReady) };
}

/**
 * Waits until the primary and `replicasRequired()` replicas (1 unless told; the replica rule
 * of replica-rule.ts) have fsynced everything this connection wrote, re-issuing short WAITAOF calls until the deadline. Throws
 * DurabilityTimeoutError when the deadline passes first, and WaitAbandonedError as soon
 * as `abandon` says the caller no longer wants the answer (checked between slices).
 * WAITAOF covers only the writes of its own physical connection, and ioredis resends a
 * command in flight at a disconnect on the next one, where a WAITAOF answers at once: with
 * `writtenOn` (the connectionGeneration the writes went out on), a wait that ends on
 * another connection throws ConnectionChangedError instead of answering.
 */
export async function waitDurable(
  valkey: Valkey,
  timeoutMs: number,
  {
    abandon,
    writtenOn,
    violation,
    replicasRequired = () => 1,
    watchedNode,
  }: DurabilityRule & { abandon?: () => boolean; writtenOn?: number } = {},
): Promise<number> {
  const started = performance.now();
  let local = 0;
  let replicas = 0;
  let required = 1;
  // A WAITAOF in flight when a failover moves the connection may get no answer until the
  // command times out; the new connection's 'ready' ends the slice at once instead.
  const ready = writtenOn === undefined ? undefined : nextReady(valkey);
  const reconnected = ready?.promise;
  try {
    return await waitSlices();
  } finally {
    ready?.cancel();
  }

  async function waitSlices(): Promise<number> {
    for (;;) {
      // Before every slice too, not only once confirmed: under `appendfsync no` a server never
      // confirms, and the wait would end as a timeout that names nothing.
      const violated = violation?.();
      if (violated !== undefined) throw new PolicyViolatedError(violated);
      const elapsed = performance.now() - started;
      const slice = Math.max(1, Math.min(waitSliceMs, Math.ceil(timeoutMs - elapsed)));
      // A server that stops answering (a blackholed host keeps the socket open) must not hold the
      // wait past its deadline: the reply is raced against it.
      required = replicasRequired();
      const answer = waitAof(valkey, required, slice);
      // Left behind when the race ends another way: its late failure is no one's to report.
      answer.catch(() => undefined);
      const reply = await withinMs(
        reconnected === undefined ? answer : Promise.race([answer, reconnected]),
        timeoutMs - elapsed + slice,
      );
      if (writtenOn !== undefined && connectionGeneration(valkey) !== writtenOn)
        throw new ConnectionChangedError();
      if (reply === undefined)
        throw new DurabilityTimeoutError(timeoutMs, local, replicas, required);
      [local, replicas] = reply;
      if (local >= 1 && replicas >= required) {
        const watched = watchedNode?.();
        if (watched !== undefined && nodeAddress(valkey) !== watched)
          throw new ConnectionChangedError(
            `the durability wait ran on ${nodeAddress(valkey)}, the replica count is for ${watched}`,
          );
        const reason = violation?.();
        if (reason !== undefined) throw new PolicyViolatedError(reason);
        return performance.now() - started;
      }
      if (abandon?.()) throw new WaitAbandonedError();
      if (performance.now() - started >= timeoutMs) {
        throw new DurabilityTimeoutError(timeoutMs, local, replicas, required);
      }
    }
  }
}

/**
 * Both policies: a server that evicts keys at maxmemory would drop resting orders, stored
 * results or dedup markers without a word, so only `noeviction` (at maxmemory every write
 * that grows memory is refused, and the conductor retries) passes. A user denied CONFIG GET
 * fails it under aof-replicated, which needs CONFIG GET anyway, and warns under memory.
 */
export async function checkNoEviction(
  valkey: Valkey,
  policy: DurabilityPolicy,
): Promise<CheckOutcome> {
  const name = "maxmemory-policy noeviction";
  try {
    const reply = (await valkey.call("CONFIG", "GET", "maxmemory-policy")) as string[];
    const value = reply[1];
    if (value === undefined) throw new Error("CONFIG GET maxmemory-policy returned nothing");
    return {
      name,
      ok: value === "noeviction",
      detail:
        value === "noeviction"
          ? "maxmemory-policy noeviction: no key is ever evicted"
          : `maxmemory-policy is ${value}: at maxmemory the server would evict books and dedup markers; set \`maxmemory-policy noeviction\``,
    };
  } catch (error) {
    const detail = `could not be checked: ${(error as Error).message}; this user needs +config|get to show the setting`;
    return policy === "memory"
      ? { name, ok: true, warning: true, detail }
      : { name, ok: false, detail };
  }
}
