/**
 * `matchd conductor`: boots the partition's single writer: enforces the durability
 * policy, claims ownership, loads the books, serves HTTP, consumes commands, and shuts
 * down gracefully on SIGTERM/SIGINT.
 */

import { describeConfig } from "../config/resolve";
import type { Config } from "../config/schema";
import {
  type CommandEnvelope,
  type CommandOutcome,
  MatchingEngine,
  MatchingInvariantError,
} from "../domain/index";
import { allocatorSetting } from "../infra/allocator-env";
import { brokerRefusalAtBoot } from "../infra/amqp/connect";
import { awaitDurabilityPolicy, type BootProgress } from "../infra/boot";
import { ExitCode } from "../infra/exit-codes";
import { countCollections } from "../infra/gc-observer";
import { createHttpApp, serveHttp } from "../infra/http/app";
import { breakInvariantOn } from "../infra/kill-point";
import type { Logger } from "../infra/log";
import { watchShutdown } from "../infra/shutdown";
import { createValkey } from "../infra/valkey/client";
import { FailoverTracker } from "../infra/valkey/failover-tracker";
import { partitionKeys } from "../infra/valkey/keys";
import { exposeDatastoreMemory } from "../infra/valkey/memory-gauges";
import {
  exposeReplicaRule,
  watchFsyncPolicy,
  withHeldAcknowledgements,
} from "../infra/valkey/policy-watch";
import { CommandConsumer } from "./consumer";
import { createConductorMetrics } from "./metrics";
import { queryRoutes } from "./queries";
import { Conductor } from "./service";
import { BooksMovedError, ConductorStore } from "./store";

/**
 * A datastore command unanswered this long fails (its batch is requeued and the books are
 * reloaded). Generous: a batch's commit script and a chunk of the book load take milliseconds.
 */
const conductorCommandTimeoutMs = 10_000;

/**
 * How long a halted conductor (a broken invariant) keeps answering /readyz and /metrics with
 * its reason before it exits: long enough for a probe or a scrape to see why, short enough
 * that its supervisor's restart comes soon.
 */
const haltGraceMs = 2000;

/** Loads that raced another conductor's commits in a row before one is logged as a warning. */
const loadRacesPerWarning = 50;

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

export async function runConductor(config: Config, log: Logger): Promise<number> {
  log.info("conductor starting", {
    config: describeConfig(config),
    durability: config.durability,
    allocator: allocatorSetting(),
  });
  // The policy is checked once the datastore answers, with HTTP already serving (the
  // contract: /metrics answers while a dependency is down); a datastore that answers and
  // cannot honour it ends the boot (exit 3).
  let policyVerified = false;
  /** Why the boot still waits for the datastore, for /readyz. */
  const bootProgress: BootProgress = {};

  // Listening first: a SIGTERM while the datastore or the broker is still unreachable at boot
  // ends the process cleanly (exit 0) instead of killing it; a second one during the stop is
  // ignored (see watchShutdown).
  const signalled = watchShutdown(log).reason;
  const keys = partitionKeys(config.partition);
  const writer = createValkey(config.datastoreUrl, {
    name: `matchd-conductor-p${config.partition}`,
    commandTimeoutMs: conductorCommandTimeoutMs,
    sentinelPassword: config.sentinelPassword,
    slotKey: keys.ownerEpoch,
  });
  writer.on("error", () => undefined); // reported through failed commits and /readyz
  const engine =
    breakInvariantOn === undefined ? new MatchingEngine() : new BrokenEngine(breakInvariantOn);
  const reader = createValkey(config.datastoreUrl, {
    name: `matchd-conductor-p${config.partition}-reader`,
    commandTimeoutMs: conductorCommandTimeoutMs,
    sentinelPassword: config.sentinelPassword,
    slotKey: keys.ownerEpoch,
  });
  reader.on("error", () => undefined); // reported through failed lookups and /readyz
  // GET /commands/:commandId waits for durability on a connection of its own: a WAITAOF on
  // the reader would hold up every batch's dedup lookup queued behind it. Connected on
  // first use.
  const queries = createValkey(config.datastoreUrl, {
    name: `matchd-conductor-p${config.partition}-queries`,
    commandTimeoutMs: conductorCommandTimeoutMs,
    sentinelPassword: config.sentinelPassword,
    slotKey: keys.ownerEpoch,
    lazy: true,
  });
  queries.on("error", () => undefined); // reported as 503 by the query
  const policyWatch = watchFsyncPolicy(config, log, `matchd-conductor-p${config.partition}-policy`);
  const store = new ConductorStore(writer, keys, reader, queries, policyWatch?.rule());
  let conductor: Conductor | undefined;
  const consumer = new CommandConsumer(config, log, () => conductor?.notify());
  const metrics = createConductorMetrics(
    config,
    () => engine.restingOrderCount(),
    () => consumer.pendingCount,
  );
  countCollections(metrics.registry);
  const failovers = new FailoverTracker(writer, metrics.registry, log);
  if (policyWatch) exposeReplicaRule(metrics.registry, policyWatch);
  // On the queries' connection: an INFO must not queue behind a commit or a durability wait.
  const memoryGauges = exposeDatastoreMemory(metrics.registry, queries);
  store.onDurable = () => failovers.durableWrite();
  conductor = new Conductor(config, engine, store, keys, consumer, metrics, log);
  const owner = conductor;

  const app = createHttpApp({
    metrics: metrics.registry,
    readiness: () => {
      const reasons: string[] = [];
      if (!policyVerified) {
        reasons.push(
          `durability policy not verified yet${bootProgress.waitingFor === undefined ? "" : `: ${bootProgress.waitingFor}`}`,
        );
      }
      if (writer.status !== "ready") reasons.push(`datastore ${writer.status}`);
      if (reader.status !== "ready") reasons.push(`datastore reader ${reader.status}`);
      if (!consumer.connected) reasons.push("broker not connected");
      if (!owner.loaded) reasons.push("books not loaded");
      if (owner.fenced) reasons.push("fenced: another conductor owns the partition");
      if (owner.halted) {
        const { kind, commandId, message } = owner.halted;
        const what = kind === "invariant" ? "a matching invariant broke" : "a batch cannot commit";
        reasons.push(
          `halted: ${what}${commandId === undefined ? "" : ` on command ${commandId}`}: ${message}`,
        );
      }
      if (owner.lastFailure) reasons.push(`last batch failed: ${owner.lastFailure}`);
      if (owner.keysLost) {
        reasons.push(
          `the datastore lost the partition's keys at ${owner.keysLost.at} (epoch ${owner.keysLost.epoch}): books, results and dedup markers restarted empty; restart the conductor once it is understood (docs/operations.md)`,
        );
      }
      const violated = policyWatch?.violation();
      if (violated !== undefined) reasons.push(violated);
      return withHeldAcknowledgements(
        {
          ready: reasons.length === 0,
          status: reasons.length === 0 ? "ready" : "not-ready",
          reasons,
          role: owner.role(),
        },
        policyWatch,
      );
    },
    routes: (app) => {
      // A standby's books may lag the owner's: every answer says whose they are.
      for (const path of ["/books/*", "/orders/*", "/digest"]) {
        app.use(path, async (c, next) => {
          await next();
          c.header("x-matchd-role", owner.role());
        });
      }
      queryRoutes(
        engine,
        store,
        () => owner.loaded,
        config.durability === "aof-replicated" ? config.durabilityTimeoutMs : undefined,
        config.httpToken,
        owner.trace,
        config.dedupRetentionSeconds,
      )(app);
    },
  });
  // The role follows a takeover within a second (see Conductor.role).
  const roleTimer = setInterval(() => void owner.refreshRole().catch(() => undefined), 1000);
  metrics.registry.gauge(
    "matching_conductor_active",
    "1 while this conductor holds the partition's current owner epoch (active), 0 as a standby",
    () => (owner.role() === "active" ? 1 : 0),
  );
  const http = serveHttp(app, config.httpPort, config.httpHost);
  log.info("http listening", { port: http.port });

  // Load now to be ready fast; ownership (a new epoch, and a reload) is claimed when the
  // first command arrives, i.e. when this conductor becomes the active consumer.
  const booted = (async () => {
    if (!(await awaitDurabilityPolicy(config, log, signalled, { dedupSizing: true }, bootProgress)))
      return "stopped";
    // Wrong credentials or a missing vhost end the boot (exit 5) rather than being retried as
    // an unreachable broker; an unreachable one is retried by the consumer.
    const refused = await brokerRefusalAtBoot(
      config.brokerUrl,
      `matchd-conductor-p${config.partition}-boot`,
    );
    if (refused !== null) throw refused;
    policyVerified = true;
    await policyWatch?.start();
    if ((await loadBooksAtBoot(owner, log)) === "halted") return "halted";
    await consumer.startWithRetry();
    return "booted";
  })();
  const boot = await Promise.race([booted, signalled]);
  if (boot === "halted") await Promise.race([Bun.sleep(haltGraceMs), signalled]);
  if (boot !== "booted") {
    log.info("conductor stopping before it started consuming");
    await http.stop();
    writer.disconnect();
    reader.disconnect();
    queries.disconnect();
    policyWatch?.stop();
    memoryGauges.stop();
    clearInterval(roleTimer);
    await consumer.close().catch(() => undefined);
    return boot === "halted" ? ExitCode.halted : ExitCode.ok;
  }
  owner.start();

  const fenced = (async () => {
    while (!owner.fenced && owner.crashed === undefined && owner.halted === undefined)
      await Bun.sleep(200);
    return owner.fenced ? "fenced" : owner.halted !== undefined ? "halted" : "crashed";
  })();
  const reason = await Promise.race([signalled, fenced]);
  log.info("conductor stopping", { reason });
  // No basic.cancel first: with single active consumer the broker would hand the partition
  // to a standby at once, which would match commands behind this one's prefetch window before
  // the window's own, requeued when the channel closes. The loop stops taking batches and
  // finishes those in flight; then the channel closes, the broker requeues what was not
  // acknowledged ahead of the rest, and only then activates the standby.
  await owner.stop();
  await consumer.close();
  if (reason === "halted") {
    // The channel is closed: the broken batch and everything after it are back in the
    // queue, unacknowledged. The probes and metrics still say why, for a moment.
    log.error("partition halted on a broken invariant; exiting", {
      commandId: owner.halted?.commandId,
      invariant: owner.halted?.message,
      exitCode: ExitCode.halted,
      graceMs: haltGraceMs,
    });
    await Promise.race([Bun.sleep(haltGraceMs), signalled]);
  }
  await http.stop();
  writer.disconnect();
  reader.disconnect();
  queries.disconnect();
  policyWatch?.stop();
  memoryGauges.stop();
  clearInterval(roleTimer);
  // A halted conductor's books may hold part of the broken batch and may break the digest's
  // own checks: not hashed.
  log.info("conductor stopped", {
    reason,
    ...(reason === "halted" ? {} : { digest: engine.digest() }),
  });
  // A fenced conductor exits non-zero so a supervisor notices the takeover; a failed loop too,
  // and a halted one with a code of its own (a bug to fix, not an outage to wait out).
  if (reason === "halted") return ExitCode.halted;
  return reason === "fenced"
    ? ExitCode.fenced
    : reason === "crashed"
      ? ExitCode.failure
      : ExitCode.ok;
}

/**
 * The engine of MATCHD_TEST_BREAK_INVARIANT_ON (tests only): applies every command, then
 * reports a broken invariant on the named one, after its effects reached the books, as the
 * worst real break would (its invariant checks run during or after the change).
 */
class BrokenEngine extends MatchingEngine {
  constructor(private readonly poisonCommandId: string) {
    super();
  }

  override apply(command: CommandEnvelope, alreadyAccepted = false): CommandOutcome {
    const outcome = super.apply(command, alreadyAccepted);
    if (command.commandId === this.poisonCommandId) {
      throw new MatchingInvariantError(
        `test hook MATCHD_TEST_BREAK_INVARIANT_ON broke the engine's invariant on ${command.commandId}`,
      );
    }
    return outcome;
  }
}
