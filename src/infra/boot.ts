/**
 * Boot-time enforcement of the durability policy: a process under `aof-replicated`
 * refuses to start against a datastore that cannot honour it; under `memory` it
 * starts with a loud warning.
 */

import { ReplyError } from "ioredis";
import type { Config } from "../config/schema";
import { backoffDelayMs } from "./backoff";
import type { Logger } from "./log";
import { parseDatastoreAddress } from "./valkey/address";
import { createValkey } from "./valkey/client";
import { checkDedupSizing } from "./valkey/dedup-sizing";
import { type CheckOutcome, checkDatastore } from "./valkey/durability";
import { partitionKeys } from "./valkey/keys";
import { checkSentinels } from "./valkey/sentinel";
import { withinMs } from "./within";

export class PolicyRefusedError extends Error {
  readonly code = "POLICY_REFUSED";
  constructor(
    readonly failures: CheckOutcome[],
    policy: string,
  ) {
    super(
      `refusing to boot: the datastore cannot honour MATCHING_DURABILITY=${policy}\n` +
        failures.map((f) => `  FAIL ${f.name}: ${f.detail}`).join("\n"),
    );
  }
}

/** `dedupSizing`: also state what the dedup window costs (the conductor's and check's). */
export async function runDatastoreChecks(
  config: Config,
  { dedupSizing = false }: { dedupSizing?: boolean } = {},
): Promise<CheckOutcome[]> {
  // A server that accepts the connection and never answers must not hang the boot.
  const boundMs = Math.max(5000, 2 * config.durabilityTimeoutMs);
  const valkey = createValkey(config.datastoreUrl, {
    name: "matchd-check",
    lazy: true,
    slotKey: partitionKeys(config.partition).ownerEpoch,
    commandTimeoutMs: boundMs,
    sentinelPassword: config.sentinelPassword,
  });
  // A check must not retry forever against a dead server (or dead Sentinels).
  valkey.options.retryStrategy = () => null;
  valkey.options.sentinelRetryStrategy = () => null;
  // Connection errors are reported by the checks themselves, not as unhandled events; an
  // error the server answered with while connecting (AUTH's WRONGPASS, say) arrives only
  // here: connect() itself rejects with "Connection is closed."
  let refused: Error | undefined;
  valkey.on("error", (error: unknown) => {
    if (error instanceof ReplyError) refused ??= error as Error;
  });
  try {
    // Bounded too: ioredis stops its own connect timeout once TCP is up.
    await withinMs(
      valkey.connect().catch(() => undefined),
      boundMs,
    );
    const probeKey = partitionKeys(config.partition).durabilityProbe;
    const address = parseDatastoreAddress(config.datastoreUrl);
    const sentinels =
      typeof address === "object" && address.kind === "sentinel"
        ? await checkSentinels(address, config.sentinelPassword)
        : undefined;
    const outcomes = await checkDatastore(
      valkey,
      config.durability,
      config.durabilityTimeoutMs,
      probeKey,
      sentinels?.lagLimitS,
    );
    // Under memory no replica is needed: what the Sentinels lack is said, never refused.
    outcomes.push(
      ...(sentinels?.outcomes ?? []).map((o) =>
        config.durability === "memory" && !o.ok ? { ...o, ok: true, warning: true } : o,
      ),
    );
    if (dedupSizing && outcomes[0]?.ok === true)
      outcomes.push(
        await checkDedupSizing(valkey, config.dedupRetentionSeconds, config.expectedRate),
      );
    // A server that answered the connection's AUTH or SELECT with an error is there: the
    // error (a wrong password, say) is the reason, and waiting does not mend it.
    const reachable = outcomes[0];
    if (refused !== undefined && reachable !== undefined && !reachable.ok) {
      reachable.detail = `the datastore refused the connection: ${refused.message}`;
      reachable.retryable = false;
    }
    return outcomes;
  } finally {
    valkey.disconnect();
  }
}

/** Retries of a datastore that is down at boot: a restart is seen within seconds. */
const bootBackoff = { baseMs: 250, capMs: 5000 };

/**
 * What a connection that cannot be made or kept now says, as opposed to a setting: refused,
 * closed or reset, timed out, a server still loading its data, or one demoted under it.
 */
const notNowPattern =
  /Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|timed out|LOADING|MASTERDOWN|READONLY|re-established|isn't writeable/i;

/** Checks that a failover under way fails for a few seconds behind Sentinels. */
const failoverShaped = new Set(["primary role", "replica connected"]);

/**
 * True when a failed check says the datastore cannot be reached now (worth waiting for), not
 * that it cannot honour the policy (a setting: waiting would not mend it). Behind Sentinels a
 * failover looks like a replica where the primary was named, a new primary without its
 * replicas yet, or a probe that timed out; the Sentinels' own checks tell a missing replica.
 */
export function cannotReachNow(outcome: CheckOutcome, sentinels: boolean): boolean {
  if (outcome.ok) return false;
  if (outcome.retryable !== undefined) return outcome.retryable;
  if (notNowPattern.test(outcome.detail)) return true;
  if (!sentinels) return false;
  return failoverShaped.has(outcome.name) || outcome.name.startsWith("probe write");
}

/** Where the boot stands, for /readyz: why the policy is not verified yet. */
export interface BootProgress {
  waitingFor?: string;
}

/**
 * The services' boot: waits while the datastore cannot be reached now (down, or a failover
 * under way), retried with backoff while the service's HTTP already answers, at most
 * `bootWaitSeconds`; then enforces the policy (PolicyRefusedError: a datastore that cannot
 * honour it is refused at once, one still unreachable after the wait is refused then).
 * Resolves false when `stopped` settles first.
 */
export async function awaitDurabilityPolicy(
  config: Config,
  log: Logger,
  stopped: Promise<unknown>,
  checks: { dedupSizing?: boolean } = {},
  progress: BootProgress = {},
): Promise<boolean> {
  let stop = false;
  const stopping = stopped.then(
    () => {
      stop = true;
    },
    () => {
      stop = true;
    },
  );
  const address = parseDatastoreAddress(config.datastoreUrl);
  const sentinels = typeof address === "object" && address.kind === "sentinel";
  const deadline = performance.now() + config.bootWaitSeconds * 1000;
  let lastLoggedMs = Number.NEGATIVE_INFINITY;
  for (let attempt = 0; ; attempt++) {
    const outcomes = await Promise.race([runDatastoreChecks(config, checks), stopping]);
    if (stop || outcomes === undefined) return false;
    const failures = outcomes.filter((o) => !o.ok);
    const waiting = failures.length > 0 && failures.every((o) => cannotReachNow(o, sentinels));
    if (!waiting || performance.now() >= deadline) {
      progress.waitingFor = undefined;
      judgeOutcomes(config, log, outcomes, waiting ? config.bootWaitSeconds : undefined);
      return true;
    }
    const why = failures.map((o) => `${o.name}: ${o.detail}`).join("; ");
    progress.waitingFor = why;
    // Said again every half minute: a wrong host or port looks the same as a slow start.
    if (performance.now() - lastLoggedMs >= 30_000) {
      lastLoggedMs = performance.now();
      log.warn("datastore unreachable at boot; the durability policy is checked once it answers", {
        detail: why,
        attempt,
        refusesAfterSeconds: config.bootWaitSeconds,
      });
    }
    await Promise.race([Bun.sleep(backoffDelayMs(attempt, bootBackoff)), stopping]);
    if (stop) return false;
  }
}

function judgeOutcomes(
  config: Config,
  log: Logger,
  outcomes: CheckOutcome[],
  /** Set when the datastore stayed unreachable for the whole boot wait. */
  waitedSeconds?: number,
): void {
  const failures = outcomes.filter((o) => !o.ok);
  if (waitedSeconds !== undefined) {
    failures.push({
      name: "boot wait",
      ok: false,
      detail: `the datastore could not be reached for ${waitedSeconds} s (MATCHING_BOOT_WAIT_S)`,
    });
  }
  if (failures.length > 0) throw new PolicyRefusedError(failures, config.durability);
  for (const outcome of outcomes.filter((o) => o.warning === true)) {
    log.warn("a boot check passed with a warning", {
      check: outcome.name,
      detail: outcome.detail,
    });
  }
  if (config.durability === "memory") {
    log.warn(
      "DURABILITY POLICY memory: acknowledged commands are NOT fsynced or replicated and CAN BE LOST on a datastore crash",
      { durability: config.durability },
    );
    return;
  }
  log.info("durability policy verified", {
    durability: config.durability,
    checks: outcomes.map((o) => `${o.name}: ${o.detail}`),
  });
}
