import { commandQueue } from "../src/infra/amqp/topology";
import { stackUp } from "../src/stack/index";
import { type DatastoreFaultKind, faultList } from "./boundaries/failover";
import { datastoreFaults } from "./datastore-faults";
import { environmentFacts, machineEnvironment } from "./environment";
import { observeFailovers, parseFailoverFlags } from "./failover";
import { FeedCheck } from "./failover-feed";
import { failoverReport } from "./failover-report";
import { activeUrl, brokerNodeFaults, type ServicePool, serviceFaults } from "./fault-drivers";
import { type OwnBenchOptions, OwnRun } from "./own-run";
import { renderReport } from "./report";
import { startService } from "./services";
import { createWorkload } from "./workloads";

/** The outboxes' lease TTL in this bench (the default is 10 s): said in the report. */
export const outboxLeaseTtlMs = 3000;

export async function runFailoverBench(options: OwnBenchOptions): Promise<number> {
  const { config, progress } = options;
  if (config.durability !== "aof-replicated") {
    process.stderr.write("matchd: failover measures the aof-replicated policy only\n");
    return 2;
  }
  const flags = parseFailoverFlags(options.flags);
  const own = new OwnRun(options, "failover");
  const { dir, register } = own;
  return own.run(async () => {
    progress(`starting the HA stack in ${dir}`);
    const info = await stackUp({ dir, ha: true, log: (line) => progress(`stack: ${line}`) });
    const base = {
      "--datastore-url": info.datastoreUrl,
      "--broker-url": info.brokerUrl,
      "--partition": config.partition,
      "--partition-count": config.partitionCount,
      "--durability": "aof-replicated",
      "--durability-timeout-ms": config.durabilityTimeoutMs,
      "--log-level": config.logLevel,
    };
    // An outbox standby waits out the dead holder's lease: short for the outbox fault, so the
    // takeover is timed rather than the TTL. Elsewhere the default, which outlasts a datastore
    // failover (a 3 s lease expired in every one of ten, stopping publication each time).
    const kinds = faultList(flags["--fault"]);
    const fault = kinds[0]!;
    const outboxFlags = fault === "outbox" ? { ...base, "--lease-ttl-ms": outboxLeaseTtlMs } : base;
    const start = (kind: "conductor" | "outbox") =>
      startService(kind, kind === "outbox" ? outboxFlags : base, progress, register);
    const pool = (kind: "conductor" | "outbox"): ServicePool => ({
      kind,
      instances: [],
      start: async () => {
        const service = await start(kind);
        poolOf[kind].instances.push(service);
        return service;
      },
    });
    const poolOf = { conductor: pool("conductor"), outbox: pool("outbox") };
    // The faulted service runs twice (active and standby); the other once.
    for (const kind of ["conductor", "outbox"] as const) {
      await poolOf[kind].start();
      if (fault === kind) await poolOf[kind].start();
    }
    // Market data through the faults: a feed, and a subscriber on each pair it checks.
    const workload = createWorkload(flags["--workload"], { partition: config.partition });
    const feedCheck = await FeedCheck.start(base, workload.pairIds, progress, register);
    const faults =
      fault === "broker-node"
        ? brokerNodeFaults(info, commandQueue(config.partition))
        : fault === "conductor" || fault === "outbox"
          ? serviceFaults(poolOf[fault])
          : datastoreFaults(info, kinds as DatastoreFaultKind[]);
    const observation = await observeFailovers({
      info,
      faults,
      config,
      // Any instance answers the final queries: each is read after the standby settled.
      conductorUrl: () => activeUrl(poolOf.conductor),
      outboxUrl: () => activeUrl(poolOf.outbox),
      flags,
      progress,
    });
    const conductorUrl = await activeUrl(poolOf.conductor);
    const feedChecks = await feedCheck.collect(info.datastoreUrl, config.partition, conductorUrl);
    // A fenced conductor exits 4, a halted one 7: a clean stop shows it never was either.
    const stops = await Promise.all(
      [...poolOf.conductor.instances, ...poolOf.outbox.instances].map((s) => s.stop()),
    );
    const conductorExit = Math.max(...stops.slice(0, poolOf.conductor.instances.length));
    const outboxExit = Math.max(...stops.slice(poolOf.conductor.instances.length));
    const environment = Object.fromEntries(environmentFacts(machineEnvironment()));
    const report = failoverReport(observation, environment);
    for (const [name, code] of [
      ["conductorStoppedCleanly", conductorExit],
      ["outboxStoppedCleanly", outboxExit],
    ] as const) {
      report.invariants[name] = `exit ${code}`;
      report.invariants[`${name}Ok`] = code === 0;
      if (code !== 0) report.invariants.ok = false;
    }
    feedCheck.apply(report, feedChecks);
    process.stdout.write(`${options.json ? JSON.stringify(report) : renderReport(report)}\n`);
    return report.invariants.ok ? 0 : 1;
  });
}
