/**
 * Boot-time enforcement of the durability policy: a process under `aof-replicated`
 * refuses to start against a datastore that cannot honour it; under `memory` it
 * starts with a loud warning.
 */

import type { Config } from "../config/schema";
import type { Logger } from "./log";
import { createValkey } from "./valkey/client";
import { type CheckOutcome, checkDatastore, datastoreReachableCheck } from "./valkey/durability";
import { partitionKeys } from "./valkey/keys";
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

export async function runDatastoreChecks(config: Config): Promise<CheckOutcome[]> {
  // A server that accepts the connection and never answers must not hang the boot.
  const boundMs = Math.max(5000, 2 * config.durabilityTimeoutMs);
  const valkey = createValkey(config.datastoreUrl, {
    name: "matchd-check",
    lazy: true,
    commandTimeoutMs: boundMs,
  });
  // A check must not retry forever against a dead server.
  valkey.options.retryStrategy = () => null;
  // Connection errors are reported by the checks themselves, not as unhandled events.
  valkey.on("error", () => undefined);
  try {
    // Bounded too: ioredis stops its own connect timeout once TCP is up.
    await withinMs(
      valkey.connect().catch(() => undefined),
      boundMs,
    );
    const probeKey = partitionKeys(config.partition).durabilityProbe;
    return await checkDatastore(valkey, config.durability, config.durabilityTimeoutMs, probeKey);
  } finally {
    valkey.disconnect();
  }
}

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
): Promise<boolean> {
  const stop = stopped.then(
    () => "stopped" as const,
    () => "stopped" as const,
  );
  for (let attempt = 0; ; attempt++) {
    const outcomes = await runDatastoreChecks(config);
    const unreachable = outcomes.find((o) => o.name === datastoreReachableCheck && !o.ok);
    if (unreachable === undefined) {
      judgeOutcomes(config, log, outcomes);
      return true;
    }
    if (attempt === 0) {
      log.warn("datastore unreachable at boot; the durability policy is checked once it answers", {
        detail: unreachable.detail,
      });
    }
    const delayMs = Math.min(5000, 250 * 2 ** Math.min(attempt, 5));
    if ((await Promise.race([Bun.sleep(delayMs), stop])) === "stopped") return false;
  }
}

function judgeOutcomes(config: Config, log: Logger, outcomes: CheckOutcome[]): void {
  const failures = outcomes.filter((o) => !o.ok);
  if (config.durability === "memory") {
    if (failures.length > 0) throw new PolicyRefusedError(failures, config.durability);
    log.warn(
      "DURABILITY POLICY memory: acknowledged commands are NOT fsynced or replicated and CAN BE LOST on a datastore crash",
      { durability: config.durability },
    );
    return;
  }
  if (failures.length > 0) throw new PolicyRefusedError(failures, config.durability);
  log.info("durability policy verified", {
    durability: config.durability,
    checks: outcomes.map((o) => `${o.name}: ${o.detail}`),
  });
}
