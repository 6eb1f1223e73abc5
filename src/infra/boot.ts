/**
 * Boot-time enforcement of the durability policy: a process under `aof-replicated`
 * refuses to start against a datastore that cannot honour it; under `memory` it
 * starts with a loud warning.
 */

import type { Config } from "../config/schema";
import type { Logger } from "./log";
import { createValkey } from "./valkey/client";
import { type CheckOutcome, checkDatastore } from "./valkey/durability";
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

/** Throws PolicyRefusedError when the policy cannot be honoured. */
export async function enforceDurabilityPolicy(config: Config, log: Logger): Promise<void> {
  const outcomes = await runDatastoreChecks(config);
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
