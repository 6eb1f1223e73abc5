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
import { type CheckOutcome, checkDatastore, datastoreReachableCheck } from "./valkey/durability";
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
 * The services' boot: waits while the datastore cannot be reached (a dependency that is down,
 * retried with backoff while the service's HTTP already answers), then enforces the policy
 * against it (PolicyRefusedError: a reachable datastore that cannot honour it is refused).
 * Resolves false when `stopped` settles first.
 */
export async function awaitDurabilityPolicy(
  config: Config,
  log: Logger,
  stopped: Promise<unknown>,
  checks: { dedupSizing?: boolean } = {},
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
  let lastLoggedMs = Number.NEGATIVE_INFINITY;
  for (let attempt = 0; ; attempt++) {
    const outcomes = await Promise.race([runDatastoreChecks(config, checks), stopping]);
    if (stop || outcomes === undefined) return false;
    const unreachable = outcomes.find(
      (o) => o.name === datastoreReachableCheck && !o.ok && o.retryable === true,
    );
    if (unreachable === undefined) {
      judgeOutcomes(config, log, outcomes);
      return true;
    }
    // Said again every half minute: a wrong host or port looks the same as a slow start.
    if (performance.now() - lastLoggedMs >= 30_000) {
      lastLoggedMs = performance.now();
      log.warn("datastore unreachable at boot; the durability policy is checked once it answers", {
        detail: unreachable.detail,
        attempt,
      });
    }
    await Promise.race([Bun.sleep(backoffDelayMs(attempt, bootBackoff)), stopping]);
    if (stop) return false;
  }
}

function judgeOutcomes(config: Config, log: Logger, outcomes: CheckOutcome[]): void {
  const failures = outcomes.filter((o) => !o.ok);
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
