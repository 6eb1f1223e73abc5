/**
 * The parts a conductor process runs on (its three datastore connections, the policy watch,
 * the store, the consumer, the metrics and the Conductor itself), each registered with its
 * cleanup on one stack as it opens: disposing the stack closes them in reverse order.
 */
import type { Config } from "../config/schema";
import type { MatchingEngine } from "../domain/index";
import { countCollections } from "../infra/gc-observer";
import type { Logger } from "../infra/log";
import { createValkey, type Valkey } from "../infra/valkey/client";
import { FailoverTracker } from "../infra/valkey/failover-tracker";
import { type PartitionKeys, partitionKeys } from "../infra/valkey/keys";
import { exposeDatastoreMemory } from "../infra/valkey/memory-gauges";
import {
  exposeReplicaRule,
  type FsyncPolicyWatch,
  watchFsyncPolicy,
} from "../infra/valkey/policy-watch";
import { conductorEngine } from "./broken-engine";
import { CommandConsumer } from "./consumer";
import { type ConductorMetrics, createConductorMetrics } from "./metrics";
import { Conductor } from "./service";
import { ConductorStore } from "./store";

/**
 * A datastore command unanswered this long fails (its batch is requeued and the books are
 * reloaded). Generous: a batch's commit script and a chunk of the book load take milliseconds.
 */
const conductorCommandTimeoutMs = 10_000;

export interface ConductorParts {
  engine: MatchingEngine;
  keys: PartitionKeys;
  writer: Valkey;
  committer: Valkey;
  reader: Valkey;
  queries: Valkey;
  policyWatch: FsyncPolicyWatch | undefined;
  store: ConductorStore;
  consumer: CommandConsumer;
  metrics: ConductorMetrics;
  owner: Conductor;
}

/** Opens every part; nothing connects to the broker yet (the boot does, once verified). */
export function openConductorParts(
  config: Config,
  log: Logger,
  cleanup: AsyncDisposableStack,
): ConductorParts {
  const keys = partitionKeys(config.partition);
  const connect = (suffix: string, lazy = false) => {
    const client = createValkey(config.datastoreUrl, {
      name: `matchd-conductor-p${config.partition}${suffix}`,
      commandTimeoutMs: conductorCommandTimeoutMs,
      sentinelPassword: config.sentinelPassword,
      slotKey: keys.ownerEpoch,
      lazy,
    });
    // Reported through failed commits and lookups, /readyz, and 503s of the queries.
    client.on("error", () => undefined);
    cleanup.defer(() => client.disconnect());
    return client;
  };
  const writer = connect("");
  const reader = connect("-reader");
  // Commits alternate between the writer and this one (see ConductorStore's committer).
  const committer = connect("-committer");
  // GET /commands/:commandId waits for durability on a connection of its own: a WAITAOF on
  // the reader would hold up every batch's dedup lookup queued behind it. Connected on
  // first use.
  const queries = connect("-queries", true);
  const policyWatch = watchFsyncPolicy(config, log, `matchd-conductor-p${config.partition}-policy`);
  if (policyWatch) cleanup.defer(() => policyWatch.stop());
  const store = new ConductorStore(writer, keys, reader, queries, policyWatch?.rule(), committer);
  const engine = conductorEngine();
  let owner: Conductor | undefined;
  const consumer = new CommandConsumer(config, log, () => owner?.notify());
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
  cleanup.defer(() => memoryGauges.stop());
  store.onDurable = () => failovers.durableWrite();
  owner = new Conductor(config, engine, store, keys, consumer, metrics, log);
  const conductor = owner;
  // The role follows a takeover within a second (see Conductor.role).
  const roleTimer = setInterval(() => void conductor.refreshRole().catch(() => undefined), 1000);
  cleanup.defer(() => clearInterval(roleTimer));
  metrics.registry.gauge(
    "matching_conductor_active",
    "1 while this conductor holds the partition's current owner epoch (active), 0 as a standby",
    () => (conductor.role() === "active" ? 1 : 0),
  );
  return {
    engine,
    keys,
    writer,
    committer,
    reader,
    queries,
    policyWatch,
    store,
    consumer,
    metrics,
    owner,
  };
}
