/**
 * `matchd conductor`: the partition's single writer as a process. It opens its parts, serves
 * HTTP, boots (the durability policy verified, the books loaded, the consumer started), runs
 * until a signal, a takeover, a halt or a crash, and closes everything in one order.
 */

import { describeConfig } from "../config/resolve";
import type { Config } from "../config/schema";
import { MatchingInvariantError } from "../domain/index";
import { allocatorSetting } from "../infra/allocator-env";
import { brokerRefusalAtBoot } from "../infra/amqp/connect";
import { awaitDurabilityPolicy } from "../infra/boot";
import { ExitCode } from "../infra/exit-codes";
import { serveHttp } from "../infra/http/app";
import type { Logger } from "../infra/log";
import { watchShutdown } from "../infra/shutdown";
import { type ConductorBoot, conductorApp } from "./app";
import { type ConductorParts, openConductorParts } from "./parts";
import type { Conductor } from "./service";
import { BooksMovedError } from "./store";

/**
 * How long a halted conductor (a broken invariant) keeps answering /readyz and /metrics with
 * its reason before it exits: long enough for a probe or a scrape to see why, short enough
 * that its supervisor's restart comes soon.
 */
const haltGraceMs = 2000;

/** Loads that raced another conductor's commits in a row before one is logged as a warning. */
const loadRacesPerWarning = 50;

/** How a run ended: a signal's name, or what the loop ran into. */
type Ending = "booted" | "stopped" | "halted" | "fenced" | "crashed" | (string & {});

/**
 * Loads the books before consuming, retried until they load. A load that raced the active
 * conductor's commits (this one is a standby) is tried again at once: one between two commits
 * succeeds. Anything else is retried with a backoff; stored books that break an invariant
 * halt the partition.
 */
async function loadBooksAtBoot(owner: Conductor, log: Logger): Promise<"loaded" | "halted"> {
  let delayMs = 100;
  for (let raced = 0; ; ) {
    try {
      await owner.reload();
      return "loaded";
    } catch (error) {
      if (error instanceof MatchingInvariantError) {
        // The stored books break an invariant: loading them again breaks it again.
        await owner.halt(error);
        return "halted";
      }
      if (error instanceof BooksMovedError && ++raced % loadRacesPerWarning !== 0) {
        await Bun.sleep(Math.random() * 20);
        continue;
      }
      log.warn("cannot load books yet; retrying", { error, delayMs });
      await Bun.sleep(delayMs);
      delayMs = Math.min(delayMs * 2, 5000);
    }
  }
}

/**
 * The policy is checked once the datastore answers, with HTTP already serving (the contract:
 * /metrics answers while a dependency is down); a datastore that answers and cannot honour it
 * ends the boot (exit 3). Books load now to be ready fast; ownership (a new epoch, and a
 * reload) is claimed when the first command arrives, i.e. when this conductor becomes the
 * active consumer.
 */
async function bootConductor(
  config: Config,
  log: Logger,
  parts: ConductorParts,
  boot: ConductorBoot,
  signalled: Promise<string>,
): Promise<"booted" | "stopped" | "halted"> {
  const verified = await awaitDurabilityPolicy(
    config,
    log,
    signalled,
    { dedupSizing: true },
    boot.progress,
  );
  if (!verified) return "stopped";
  // Wrong credentials or a missing vhost end the boot (exit 5) rather than being retried as
  // an unreachable broker; an unreachable one is retried by the consumer.
  const refused = await brokerRefusalAtBoot(
    config.brokerUrl,
    `matchd-conductor-p${config.partition}-boot`,
  );
  if (refused !== null) throw refused;
  boot.policyVerified = true;
  await parts.policyWatch?.start();
  if ((await loadBooksAtBoot(parts.owner, log)) === "halted") return "halted";
  await parts.consumer.startWithRetry();
  return "booted";
}

/** Resolves when the loop can go on no longer: fenced by a takeover, halted, or crashed. */
async function loopEnded(owner: Conductor): Promise<"fenced" | "halted" | "crashed"> {
  while (!owner.fenced && owner.crashed === undefined && owner.halted === undefined)
    await Bun.sleep(200);
  return owner.fenced ? "fenced" : owner.halted !== undefined ? "halted" : "crashed";
}

/**
 * Boots and runs, registering each stop on `cleanup` as the thing it stops starts. Disposal
 * runs them in reverse: the loop's stop, the consumer's close, a halt's grace, HTTP, then the
 * parts (openConductorParts).
 */
async function serveConductor(
  config: Config,
  log: Logger,
  parts: ConductorParts,
  signalled: Promise<string>,
  cleanup: AsyncDisposableStack,
): Promise<{ ending: Ending; consumed: boolean }> {
  const { owner, consumer } = parts;
  const boot: ConductorBoot = { policyVerified: false, progress: {} };
  const http = serveHttp(conductorApp(config, parts, boot), config.httpPort, config.httpHost);
  cleanup.defer(() => http.stop());
  log.info("http listening", { port: http.port });
  let ending: Ending = "stopped";
  cleanup.defer(async () => {
    // The probes and metrics say why, for a moment, before a halted process exits.
    if (ending === "halted") await Promise.race([Bun.sleep(haltGraceMs), signalled]);
  });
  // Closed after the loop stopped (registered later, so disposed earlier: see below). A close
  // that fails before consuming began is no one's concern.
  let consumed = false;
  cleanup.defer(() => (consumed ? consumer.close() : consumer.close().catch(() => undefined)));
  ending = await Promise.race([bootConductor(config, log, parts, boot, signalled), signalled]);
  if (ending !== "booted") {
    log.info("conductor stopping before it started consuming");
    return { ending, consumed };
  }
  owner.start();
  consumed = true;
  // No basic.cancel first: with single active consumer the broker would hand the partition
  // to a standby at once, which would match commands behind this one's prefetch window before
  // the window's own, requeued when the channel closes. The loop stops taking batches and
  // finishes those in flight; then the channel closes, the broker requeues what was not
  // acknowledged ahead of the rest, and only then activates the standby.
  cleanup.defer(() => owner.stop());
  ending = await Promise.race([signalled, loopEnded(owner)]);
  log.info("conductor stopping", { reason: ending });
  if (ending === "halted") {
    log.error("partition halted on a broken invariant; exiting", {
      commandId: owner.halted?.commandId,
      invariant: owner.halted?.message,
      exitCode: ExitCode.halted,
      graceMs: haltGraceMs,
    });
  }
  return { ending, consumed };
}

export async function runConductor(config: Config, log: Logger): Promise<number> {
  log.info("conductor starting", {
    config: describeConfig(config),
    durability: config.durability,
    allocator: allocatorSetting(),
  });
  // Listening first: a SIGTERM while the datastore or the broker is still unreachable at boot
  // ends the process cleanly (exit 0) instead of killing it; a second one during the stop is
  // ignored (see watchShutdown).
  const signalled = watchShutdown(log).reason;
  const cleanup = new AsyncDisposableStack();
  let run: { ending: Ending; consumed: boolean };
  let parts: ConductorParts;
  try {
    parts = openConductorParts(config, log, cleanup);
    run = await serveConductor(config, log, parts, signalled, cleanup);
  } finally {
    await cleanup.disposeAsync();
  }
  const { ending, consumed } = run;
  if (consumed) {
    // A halted conductor's books may hold part of the broken batch and may break the
    // digest's own checks: not hashed.
    const digest = ending === "halted" ? {} : { digest: parts.engine.digest() };
    log.info("conductor stopped", { reason: ending, ...digest });
  }
  return conductorExitCode(ending);
}

/**
 * A fenced conductor exits non-zero so a supervisor notices the takeover; a failed loop too,
 * and a halted one with a code of its own (a bug to fix, not an outage to wait out).
 */
function conductorExitCode(ending: Ending): number {
  switch (ending) {
    case "halted":
      return ExitCode.halted;
    case "fenced":
      return ExitCode.fenced;
    case "crashed":
      return ExitCode.failure;
    default:
      return ExitCode.ok;
  }
}
