/**
 * Runs `matchd bench failover` end to end: its own HA stack in a private directory, a
 * conductor and an outbox on the Sentinel URL, the fault run, the report, and the teardown
 * (also at Ctrl-C).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Config } from "../config/schema";
import { commandQueue } from "../infra/amqp/topology";
import { stackDown, stackUp } from "../stack/index";
import { environmentFacts, machineEnvironment } from "./environment";
import { observeFailovers, parseFailoverFlags } from "./failover";
import { failoverReport } from "./failover-report";
import {
  activeUrl,
  brokerNodeFaults,
  datastorePrimaryFaults,
  type ServicePool,
  serviceFaults,
} from "./fault-drivers";
import { renderReport } from "./report";
import { type ServiceProcess, startService } from "./services";

/** The outboxes' lease TTL in this bench (the default is 10 s): said in the report. */
export const outboxLeaseTtlMs = 3000;

export async function runFailoverBench(options: {
  config: Config;
  flags: ReadonlyMap<string, string>;
  json: boolean;
  keepStack: boolean;
  progress: (line: string) => void;
}): Promise<number> {
  const { config, progress } = options;
  if (config.durability !== "aof-replicated") {
    process.stderr.write("matchd: failover measures the aof-replicated policy only\n");
    return 2;
  }
  const flags = parseFailoverFlags(options.flags);
  const given = options.flags.get("--dir");
  const dir = given ?? mkdtempSync(join(tmpdir(), "matchd-failover-"));
  const services: ServiceProcess[] = [];
  let ok = false;
  const teardown = async () => {
    await Promise.all(services.map((s) => s.stop().catch(() => 1)));
    if (!options.keepStack) await stackDown({ dir }).catch(() => undefined);
    if (given === undefined && ok && !options.keepStack)
      rmSync(dir, { recursive: true, force: true });
  };
  const interrupted = () => void teardown().then(() => process.exit(130));
  process.once("SIGINT", interrupted);
  try {
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
    const register = (service: ServiceProcess) => services.push(service);
    // An outbox standby waits out the dead holder's lease: short for the outbox fault, so the
    // takeover is timed rather than the TTL. Elsewhere the default, which outlasts a datastore
    // failover (a 3 s lease expired in every one of ten, stopping publication each time).
    const fault = flags["--fault"];
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
    const faults =
      fault === "datastore-primary"
        ? datastorePrimaryFaults(info)
        : fault === "broker-node"
          ? brokerNodeFaults(info, commandQueue(config.partition))
          : serviceFaults(poolOf[fault]);
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
    process.stdout.write(`${options.json ? JSON.stringify(report) : renderReport(report)}\n`);
    ok = report.invariants.ok;
    if (!ok || options.keepStack) progress(`the stack's directory is kept: ${dir}`);
    return ok ? 0 : 1;
  } finally {
    process.off("SIGINT", interrupted);
    await teardown();
  }
}
