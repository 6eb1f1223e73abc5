/**
 * `matchd bench soak`: the full pipeline open loop at a fixed rate for minutes to hours, on a
 * private stack, sampled every few seconds, to show that memory and disk stay bounded once the
 * dedup window is crossed. It runs `bench full-pipeline` as a child against a conductor and an
 * outbox of its own (so it knows their pids), and keeps the child's invariants.
 */
import { readFileSync, statfsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { Config } from "../config/schema";
import { connectBroker } from "../infra/amqp/connect";
import { commandQueue } from "../infra/amqp/topology";
import { createValkey, parseInfo, type Valkey } from "../infra/valkey/client";
import { partitionKeys } from "../infra/valkey/keys";
import { stackUp } from "../stack/index";
import { restartValkey } from "../stack/valkey";
import { environmentFacts, machineEnvironment } from "./environment";
import type { TimelinePoint } from "./html-report";
import { ownFlagProblems, parseOwnFlags } from "./own-flags";
import { type OwnBenchOptions, OwnRun } from "./own-run";
import { type ServiceProcess, selfCommand, startService } from "./services";
import { renderSoakHtml } from "./soak-html";
import { buildSoakReport, renderSoakReport } from "./soak-report";
import { type SoakSample, takeSample } from "./soak-sampler";
import { type WorkloadName, workloadNames } from "./workloads";

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const soakFlags = z.object({
  "--rate": int(1, 20_000).default(2000),
  "--duration": int(30, 7 * 24 * 3600).default(1800),
  "--sample-seconds": int(1, 600).default(5),
  "--workload": z.enum(workloadNames as [WorkloadName, ...WorkloadName[]]).default("multi-pair"),
  "--seed": int(0, 2 ** 31).default(1),
  /** Seconds into the load at which the replica is SIGKILLed and restarted (a full resync). */
  "--restart-replica-at": int(1, 7 * 24 * 3600).optional(),
  /** Also write the HTML report, every series plotted over time. */
  "--report": z.string().min(1).optional(),
});
export type SoakFlags = z.infer<typeof soakFlags>;

export function soakProblems(flags: ReadonlyMap<string, string>): string[] {
  return ownFlagProblems(
    "soak",
    soakFlags,
    flags,
    "it runs its own stack at --rate for --duration",
  );
}

export interface SoakRun {
  flags: SoakFlags;
  windowSeconds: number;
  samples: SoakSample[];
  timeline: TimelinePoint[];
  pipeline: {
    invariants: { ok: boolean; [check: string]: unknown };
    latencyMs: Record<string, number>;
    commandsPerSecond: number;
    /** The child's exit: 0, or 1 with a failed invariant; anything else is a failed run. */
    exitCode: number;
  };
  memAvailableBytes: number;
  diskFreeBytes: number;
  environment: Record<string, string>;
  replicaRestart: ReplicaRestart | undefined;
}

/** The replica's SIGKILL and restart, seconds since the load began. */
export interface ReplicaRestart {
  killedAtS: number;
  restartedAtS: number | undefined;
  /** When the primary listed it online again. */
  onlineAgainAtS: number | undefined;
  /** Full resyncs the primary served meanwhile (INFO stats sync_full). */
  fullResyncs: number;
  error?: string;
}

export async function runSoakBench(options: OwnBenchOptions): Promise<number> {
  const { config, progress } = options;
  const flags = parseOwnFlags(soakFlags, options.flags);
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
    const run = await soak(info, conductor, outbox, flags, config, own, progress);
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
  info: Awaited<ReturnType<typeof stackUp>>,
  conductor: ServiceProcess,
  outbox: ServiceProcess,
  flags: SoakFlags,
  config: Config,
  own: OwnRun,
  progress: (line: string) => void,
): Promise<SoakRun> {
  const { dir } = own;
  const seriesFile = join(dir, "soak-series.json");
  const { MATCHING_REPLICA_URL: _replica, ...env } = process.env;
  const child = Bun.spawn(
    [
      ...selfCommand(),
      ...["bench", "full-pipeline", "--json", "--workload", flags["--workload"]],
      ...["--rate", String(flags["--rate"]), "--duration", String(flags["--duration"])],
      ...["--seed", String(flags["--seed"]), "--series", seriesFile],
      ...["--conductor-url", conductor.url, "--outbox-url", outbox.url],
    ],
    {
      stdout: "pipe",
      stderr: "pipe",
      env: {
        ...env,
        MATCHING_DATASTORE_URL: info.datastoreUrl,
        MATCHING_BROKER_URL: info.brokerUrl,
        MATCHING_DURABILITY: config.durability,
      },
    },
  );
  // The load begins when the child says it is timing: its commands are made before that.
  let loadStartedAt: number | undefined;
  const errTail: string[] = [];
  const readErr = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      for (const line of decoder.decode(chunk).split("\n")) {
        if (!line) continue;
        if (loadStartedAt === undefined && / timing \d+ commands/.test(line))
          loadStartedAt = performance.now();
        errTail.push(line);
        if (errTail.length > 30) errTail.shift();
      }
    }
  })();
  const out = new Response(child.stdout).text();

  const primary = createValkey(info.datastoreUrl, { name: "matchd-bench-soak" });
  const replica = createValkey(info.replicaUrl, { name: "matchd-bench-soak" });
  // A server down (the replica restarted on purpose) is a failed sample, said once per sample.
  for (const server of [primary, replica]) server.on("error", () => undefined);
  const broker = await connectBroker(info.brokerUrl, "matchd-bench-soak");
  broker.on("error", () => undefined);
  const keys = partitionKeys(config.partition);
  const targets = {
    servers: { primary, replica },
    valkey: primary,
    streamKey: keys.events,
    broker,
    commandQueue: commandQueue(config.partition),
    pids: () => ({
      conductor: conductor.pid,
      outbox: outbox.pid,
      bench: child.pid,
      "valkey-primary": info.pids["valkey-primary"] ?? 0,
      "valkey-replica": replicaPid,
      rabbitmq: info.pids["rabbitmq-beam"] ?? 0,
    }),
    conductorUrl: conductor.url,
    outboxUrl: outbox.url,
  };
  let replicaPid = info.pids["valkey-replica"] ?? 0;
  let replicaRestart: ReplicaRestart | undefined;
  let restarting: Promise<void> | undefined;
  const restartAt = flags["--restart-replica-at"];
  const since = () => (performance.now() - (loadStartedAt ?? performance.now())) / 1000;
  const restartReplica = async (record: ReplicaRestart) => {
    const fullBefore = await fullSyncs(primary);
    process.kill(replicaPid, "SIGKILL");
    progress(`soak: SIGKILLed the replica at ${Math.round(record.killedAtS)} s`);
    await Bun.sleep(2000);
    const port = Number(new URL(info.replicaUrl).port);
    const restarted = await restartValkey({ dir: join(dir, "valkey-replica"), port });
    // Not in the stack's record: stackDown would leave it running.
    own.onTeardown(() => restarted.stop());
    replicaPid = restarted.pid;
    record.restartedAtS = since();
    while (!(await replicaOnline(primary))) await Bun.sleep(200);
    record.onlineAgainAtS = since();
    record.fullResyncs = (await fullSyncs(primary)) - fullBefore;
    progress(`soak: the replica is online again at ${Math.round(record.onlineAgainAtS)} s`);
  };
  const samples: SoakSample[] = [];
  const memAvailableBytes = memAvailable();
  const diskFreeBytes = (() => {
    const stats = statfsSync(dir);
    return stats.bavail * stats.bsize;
  })();
  let lastSaid = 0;
  while (child.exitCode === null) {
    await Bun.sleep(flags["--sample-seconds"] * 1000);
    if (loadStartedAt === undefined || child.exitCode !== null) continue;
    const t = (performance.now() - loadStartedAt) / 1000;
    if (restartAt !== undefined && replicaRestart === undefined && t >= restartAt) {
      const record: ReplicaRestart = {
        killedAtS: t,
        restartedAtS: undefined,
        onlineAgainAtS: undefined,
        fullResyncs: 0,
      };
      replicaRestart = record;
      restarting = restartReplica(record).catch((error: unknown) => {
        record.error = (error as Error).message;
      });
    }
    try {
      samples.push(await takeSample(targets, t));
    } catch (error) {
      progress(`a sample failed: ${(error as Error).message}`);
    }
    if (t - lastSaid >= 60) {
      lastSaid = t;
      const last = samples[samples.length - 1];
      progress(
        `soak: ${Math.round(t)} s of ${flags["--duration"]}; primary used_memory ${last ? Math.round(last.servers.primary!.usedMemory / 1e6) : "?"} MB`,
      );
    }
  }
  await readErr;
  await restarting;
  const code = await child.exited;
  primary.disconnect();
  replica.disconnect();
  await broker.close().catch(() => undefined);
  let pipeline: SoakRun["pipeline"];
  try {
    pipeline = JSON.parse(await out) as SoakRun["pipeline"];
  } catch {
    throw new Error(`full-pipeline exited ${code} without a report:\n${errTail.join("\n")}`);
  }
  pipeline.exitCode = code;
  const timeline = (JSON.parse(readFileSync(seriesFile, "utf8")) as { timeline: TimelinePoint[] })
    .timeline;
  return {
    flags,
    windowSeconds: config.dedupRetentionSeconds,
    samples,
    timeline,
    pipeline,
    memAvailableBytes,
    diskFreeBytes,
    environment: Object.fromEntries(environmentFacts(machineEnvironment())),
    replicaRestart,
  };
}

async function fullSyncs(primary: Valkey): Promise<number> {
  return Number(parseInfo(await primary.info("stats")).get("sync_full") ?? 0);
}

async function replicaOnline(primary: Valkey): Promise<boolean> {
  const replication = await primary.info("replication").catch(() => "");
  return /slave\d+:.*state=online/.test(replication);
}

function memAvailable(): number {
  const match = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
  return match === null ? 0 : Number(match[1]) * 1024;
}
