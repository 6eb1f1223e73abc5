/**
 * `matchd bench soak`: the full pipeline open loop at a fixed rate for minutes to hours, on a
 * private stack, sampled every few seconds, to show that memory and disk stay bounded once the
 * dedup window is crossed. It runs `bench full-pipeline` as a child against a conductor and an
 * outbox of its own (so it knows their pids), and keeps the child's invariants.
 */
import { readFileSync, statfsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../src/config/schema";
import { connectBroker } from "../src/infra/amqp/connect";
import { commandQueue } from "../src/infra/amqp/topology";
import { createValkey } from "../src/infra/valkey/client";
import { partitionKeys } from "../src/infra/valkey/keys";
import { type StackInfo, stackUp } from "../src/stack/index";
import { type SoakFlags, soakFlags } from "./boundaries/soak";
import { environmentFacts, machineEnvironment } from "./environment";
import { parseBenchFlags } from "./flag-parse";
import { type OwnBenchOptions, OwnRun } from "./own-run";
import { type ReplicaRestart, ReplicaRestarter } from "./replica-restart";
import type { TimelinePoint } from "./series-recorder";
import { type ServiceProcess, startService } from "./services";
import { type PipelineChild, type PipelineOutcome, spawnPipeline } from "./soak-child";
import { renderSoakHtml } from "./soak-html";
import { buildSoakReport, renderSoakReport } from "./soak-report";
import { type SoakSample, type SoakTargets, takeSample } from "./soak-sampler";
import { StallWatch } from "./valkey-stalls";

export interface SoakRun {
  flags: SoakFlags;
  windowSeconds: number;
  samples: SoakSample[];
  timeline: TimelinePoint[];
  pipeline: PipelineOutcome;
  memAvailableBytes: number;
  diskFreeBytes: number;
  environment: Record<string, string>;
  replicaRestart: ReplicaRestart | undefined;
}

export async function runSoakBench(options: OwnBenchOptions): Promise<number> {
  const { config, progress } = options;
  const flags = parseBenchFlags(soakFlags, options.flags);
  const own = new OwnRun(options, "soak");
  const { dir, register } = own;
  return own.run(async () => {
    progress(`starting the stack in ${dir}`);
    const info = await stackUp({ dir, log: (line) => progress(`stack: ${line}`) });
    const base = {
      "--datastore-url": info.datastoreUrl,
      "--broker-url": info.brokerUrl,
      "--partition": config.partition,
      "--durability": config.durability,
      "--durability-timeout-ms": config.durabilityTimeoutMs,
      "--log-level": config.logLevel,
    };
    const conductor = await startService(
      "conductor",
      { ...base, "--dedup-retention-s": config.dedupRetentionSeconds },
      progress,
      register,
    );
    const outbox = await startService("outbox", base, progress, register);
    const run = await soak(info, { conductor, outbox }, flags, config, own, progress);
    const report = buildSoakReport(run);
    const reportFile = flags["--report"];
    if (reportFile !== undefined) {
      writeFileSync(reportFile, renderSoakHtml(report));
      progress(`HTML report written to ${reportFile}`);
    }
    process.stdout.write(`${options.json ? JSON.stringify(report) : renderSoakReport(report)}\n`);
    return report.invariants.ok ? 0 : 1;
  });
}

async function soak(
  info: StackInfo,
  services: { conductor: ServiceProcess; outbox: ServiceProcess },
  flags: SoakFlags,
  config: Config,
  own: OwnRun,
  progress: (line: string) => void,
): Promise<SoakRun> {
  const load = spawnPipeline({
    urls: info,
    services,
    durability: config.durability,
    seriesFile: join(own.dir, "soak-series.json"),
    onTeardown: (stop) => own.onTeardown(stop),
    args: [
      ...["--workload", flags["--workload"], "--seed", String(flags["--seed"])],
      ...["--rate", String(flags["--rate"]), "--duration", String(flags["--duration"])],
    ],
  });
  const primary = createValkey(info.datastoreUrl, { name: "matchd-bench-soak" });
  const replica = createValkey(info.replicaUrl, { name: "matchd-bench-soak" });
  // A server down (the replica restarted on purpose) is a failed sample, said once per sample.
  for (const server of [primary, replica]) server.on("error", () => undefined);
  const broker = await connectBroker(info.brokerUrl, "matchd-bench-soak");
  broker.on("error", () => undefined);
  const restarter = new ReplicaRestarter(
    info,
    primary,
    own,
    progress,
    flags["--restart-replica-at"],
  );
  const targets: SoakTargets = {
    servers: { primary, replica },
    valkey: primary,
    streamKey: partitionKeys(config.partition).events,
    broker,
    commandQueue: commandQueue(config.partition),
    pids: () => ({
      conductor: services.conductor.pid,
      outbox: services.outbox.pid,
      bench: load.pid,
      "valkey-primary": info.pids["valkey-primary"] ?? 0,
      "valkey-replica": restarter.pid,
      rabbitmq: info.pids["rabbitmq-beam"] ?? 0,
    }),
    conductorUrl: services.conductor.url,
    outboxUrl: services.outbox.url,
    stalls: new StallWatch({ primary, replica }),
  };
  // Sets the servers' latency-monitor threshold before the load begins; nothing is recorded yet.
  await targets.stalls.read(0);
  const memAvailableBytes = memAvailable();
  const disk = statfsSync(own.dir);
  const samples = await sampleWhileLoaded(load, targets, restarter, flags, progress);
  await restarter.done();
  const { pipeline, timeline } = await load.finished();
  primary.disconnect();
  replica.disconnect();
  await broker.close().catch(() => undefined);
  return {
    flags,
    windowSeconds: config.dedupRetentionSeconds,
    samples,
    timeline,
    pipeline,
    memAvailableBytes,
    diskFreeBytes: disk.bavail * disk.bsize,
    environment: Object.fromEntries(environmentFacts(machineEnvironment())),
    replicaRestart: restarter.record,
  };
}

/** A sample every --sample-seconds from the moment the load began until it ends. */
async function sampleWhileLoaded(
  load: PipelineChild,
  targets: SoakTargets,
  restarter: ReplicaRestarter,
  flags: SoakFlags,
  progress: (line: string) => void,
): Promise<SoakSample[]> {
  const samples: SoakSample[] = [];
  const since = () => (performance.now() - (load.loadStartedAt() ?? performance.now())) / 1000;
  let lastSaid = 0;
  while (load.running()) {
    await Bun.sleep(flags["--sample-seconds"] * 1000);
    if (load.loadStartedAt() === undefined || !load.running()) continue;
    const t = since();
    restarter.maybeStart(t, since);
    try {
      samples.push(await takeSample(targets, t));
    } catch (error) {
      progress(`a sample failed: ${(error as Error).message}`);
    }
    if (t - lastSaid >= 60) {
      lastSaid = t;
      const used = samples[samples.length - 1]?.servers.primary?.usedMemory;
      progress(
        `soak: ${Math.round(t)} s of ${flags["--duration"]}; primary used_memory ${used === undefined ? "?" : Math.round(used / 1e6)} MB`,
      );
    }
  }
  return samples;
}

function memAvailable(): number {
  const match = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
  return match === null ? 0 : Number(match[1]) * 1024;
}
