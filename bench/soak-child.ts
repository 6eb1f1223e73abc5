/**
 * `bench full-pipeline` as a child process of this binary, for the benches that run it on stacks
 * of their own (soak, ha-cost): against given services or its own, it says when its timed load
 * begins (its commands are made before that), and gives its report, and its per-second series
 * when asked, when it ends.
 */
import { readFileSync } from "node:fs";
import type { Percentiles } from "./histogram";
import type { TimelinePoint } from "./series-recorder";
import type { ServiceProcess } from "./services";
import { spawnSelf } from "./spawn-self";

export interface PipelineOutcome {
  invariants: { ok: boolean; [check: string]: unknown };
  latencyMs: Percentiles;
  commandsPerSecond: number;
  /** The child's exit: 0, or 1 with a failed invariant; anything else is a failed run. */
  exitCode: number;
  /** CPU seconds of the child and the services it started and reaped (wait4's rusage). */
  cpuSeconds: number;
}

export interface PipelineChild {
  pid: number;
  running(): boolean;
  /** performance.now() when the child began its timed load; undefined until then. */
  loadStartedAt(): number | undefined;
  /** The report, and the per-second series (empty without a `seriesFile`). */
  finished(): Promise<{ pipeline: PipelineOutcome; timeline: TimelinePoint[] }>;
}

export function spawnPipeline(options: {
  urls: { datastoreUrl: string; brokerUrl: string };
  /** Running services to measure; without them the child starts its own. */
  services?: { conductor: ServiceProcess; outbox: ServiceProcess };
  args: string[];
  durability: string;
  seriesFile?: string;
  /** Runs the child (and so the services it starts) on these CPUs only: `taskset -c`. */
  cpus?: string;
  /** More settings for the child, such as its partition. */
  env?: Record<string, string>;
  /** Where the child's stop is registered: a run torn down early stops it with its stacks. */
  onTeardown?: (stop: () => Promise<unknown>) => void;
}): PipelineChild {
  const { services, seriesFile } = options;
  const { MATCHING_REPLICA_URL: _replica, ...env } = process.env;
  const child = spawnSelf(
    [
      // The children's own figures are what their parents read: no floor after each run.
      ...["bench", "full-pipeline", "--json", "--floor-seconds", "0", ...options.args],
      ...(seriesFile === undefined ? [] : ["--series", seriesFile]),
      ...(services === undefined
        ? []
        : ["--conductor-url", services.conductor.url, "--outbox-url", services.outbox.url]),
    ],
    {
      prefix: options.cpus === undefined ? [] : ["taskset", "-c", options.cpus],
      stdout: "pipe",
      stderr: "pipe",
      // Without the replica URL; spawnSelf adds the allocator setting, which the services
      // this child starts inherit.
      env: {
        ...env,
        MATCHING_DATASTORE_URL: options.urls.datastoreUrl,
        MATCHING_BROKER_URL: options.urls.brokerUrl,
        MATCHING_DURABILITY: options.durability,
        ...options.env,
      },
    },
  );
  // SIGTERM lets the child stop the services it started; one still there 15 s on is killed.
  options.onTeardown?.(async () => {
    if (child.exitCode !== null) return;
    child.kill("SIGTERM");
    const exited = await Promise.race([child.exited, Bun.sleep(15_000).then(() => undefined)]);
    if (exited === undefined) child.kill("SIGKILL");
  });
  let startedAt: number | undefined;
  const errTail: string[] = [];
  const readErr = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      for (const line of decoder.decode(chunk).split("\n")) {
        if (!line) continue;
        if (startedAt === undefined && / timing \d+ commands/.test(line))
          startedAt = performance.now();
        errTail.push(line);
        if (errTail.length > 30) errTail.shift();
      }
    }
  })();
  const out = new Response(child.stdout).text();
  return {
    pid: child.pid,
    running: () => child.exitCode === null,
    loadStartedAt: () => startedAt,
    finished: async () => {
      await readErr;
      const code = await child.exited;
      let pipeline: PipelineOutcome;
      try {
        pipeline = JSON.parse(await out) as PipelineOutcome;
      } catch {
        throw new Error(`full-pipeline exited ${code} without a report:\n${errTail.join("\n")}`);
      }
      pipeline.exitCode = code;
      pipeline.cpuSeconds = Number(child.resourceUsage()?.cpuTime.total ?? 0) / 1e6;
      if (seriesFile === undefined) return { pipeline, timeline: [] };
      const series = JSON.parse(readFileSync(seriesFile, "utf8")) as { timeline: TimelinePoint[] };
      return { pipeline, timeline: series.timeline };
    },
  };
}
