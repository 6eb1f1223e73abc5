/**
 * `matchd outbox --partition N`: the partition's event mover as a process. It opens its parts,
 * serves /healthz, /readyz and /metrics, boots (the durability policy verified), runs the
 * delivery loop until a signal, and stops in one order: stop reading, settle confirms,
 * acknowledge, release the lease, close.
 */

import type { Config } from "../config/schema";
import { allocatorSetting } from "../infra/allocator-env";
import { brokerRefusalAtBoot } from "../infra/amqp/connect";
import { awaitDurabilityPolicy } from "../infra/boot";
import { ExitCode } from "../infra/exit-codes";
import { serveHttp } from "../infra/http/app";
import type { Logger } from "../infra/log";
import { type Shutdown, watchShutdown } from "../infra/shutdown";
import { withinMs } from "../infra/within";
import { type OutboxBoot, outboxApp } from "./app";
import { leaseCommandTimeoutMs, type OutboxParts, openOutboxParts } from "./parts";

/**
 * Bound on the delivery loop's stop, above its own 10 s settle bound; the lease release
 * after it has a bound of its own (see below).
 */
const shutdownTimeoutMs = 15_000;

/**
 * The contract's /metrics answers while a dependency is down: the policy is checked once the
 * datastore answers; one that answers and cannot honour it ends the boot (exit 3), and so do
 * wrong broker credentials or a missing vhost (exit 5), rather than being retried as an
 * unreachable broker (which the delivery loop retries).
 */
async function bootOutbox(
  config: Config,
  log: Logger,
  parts: OutboxParts,
  boot: OutboxBoot,
  shutdown: Shutdown,
): Promise<boolean> {
  if (!(await awaitDurabilityPolicy(config, log, shutdown.reason, {}, boot.progress))) return false;
  const refused = await brokerRefusalAtBoot(
    config.brokerUrl,
    `matchd-outbox-p${config.partition}-boot`,
  );
  if (refused !== null) throw refused;
  boot.policyVerified = true;
  await parts.policyWatch?.start();
  return true;
}

/** Stops the loop within its bound; a loop that failed fails its stop, and that is said. */
async function stopLoop(parts: OutboxParts, log: Logger): Promise<void> {
  const stopped = await withinMs(
    parts.loop.stop().then(
      () => true,
      () => false,
    ),
    shutdownTimeoutMs,
  );
  if (stopped !== true)
    log.warn("shutdown did not finish in time; closing anyway", { shutdownTimeoutMs });
}

/**
 * Boots and runs, registering each stop on `cleanup` as the thing it stops starts; disposal
 * runs them in reverse: the loop, the lease's release, HTTP, then the parts. Returns the
 * reason it stopped, or undefined when it stopped before it started.
 */
async function serveOutbox(
  config: Config,
  log: Logger,
  parts: OutboxParts,
  shutdown: Shutdown,
  cleanup: AsyncDisposableStack,
): Promise<string | undefined> {
  const boot: OutboxBoot = { policyVerified: false, progress: {} };
  const server = serveHttp(outboxApp(parts, boot), config.httpPort, config.httpHost);
  cleanup.defer(() => server.stop());
  log.info("outbox started", {
    owner: parts.ownerId,
    httpPort: server.port,
    window: config.outboxWindow,
    readCount: config.outboxReadCount,
    leaseTtlMs: config.outboxLeaseTtlMs,
    claimIdleMs: config.outboxClaimIdleMs,
    allocator: allocatorSetting(),
  });
  if (!(await bootOutbox(config, log, parts, boot, shutdown))) {
    log.info("outbox stopping before it started");
    return undefined;
  }
  // Released in any case (a broker that stopped answering can hold up the loop's stop), with
  // its own bound, longer than one keeper command may take: a successor should not have to
  // wait out the lease's TTL.
  cleanup.defer(() => withinMs(parts.lease.release(), leaseCommandTimeoutMs(config) + 1000));
  parts.lease.start();
  const running = parts.loop.start();
  cleanup.defer(() => stopLoop(parts, log));
  // A loop that ends by itself (it should not), or fails, also ends the process, through the
  // same stop (the lease released), with exit 1.
  running.then(
    () => shutdown.stop("loop ended"),
    (error: unknown) => {
      log.error("delivery loop failed", { error });
      shutdown.stop("loop ended");
    },
  );
  const signal = await shutdown.reason;
  log.info("outbox shutting down", { signal });
  return signal;
}

export async function runOutbox(config: Config, log: Logger): Promise<number> {
  // The first signal stops the outbox, later ones are ignored (see watchShutdown), also while
  // it waits for the datastore at boot.
  const shutdown = watchShutdown(log);
  const cleanup = new AsyncDisposableStack();
  let stoppedBy: string | undefined;
  try {
    const parts = openOutboxParts(config, log, cleanup);
    stoppedBy = await serveOutbox(config, log, parts, shutdown, cleanup);
  } finally {
    await cleanup.disposeAsync();
  }
  if (stoppedBy === undefined) return ExitCode.ok;
  log.info("outbox stopped");
  // A loop that ended by itself is a failure a supervisor must see.
  return stoppedBy === "loop ended" ? ExitCode.failure : ExitCode.ok;
}
