/**
 * What a pipeline bench runs against: the private stack (started when no URLs are
 * given) and the conductor and outbox as child processes of this same binary, with
 * readiness waits and a teardown that also runs on Ctrl-C.
 */
import type { Config } from "../src/config/schema";
import { stackDown, stackUp } from "../src/stack/index";
import { freePorts } from "../src/stack/process";
import { spawnSelf } from "./spawn-self";

export interface ServiceProcess {
  name: string;
  url: string;
  pid: number;
  stop(): Promise<number>;
  kill(): void;
  exited: Promise<number>;
}

export interface BenchStack {
  datastoreUrl: string;
  brokerUrl: string;
  privateStack: boolean;
  teardown(): Promise<void>;
}

export async function ensureStack(options: {
  config: Config;
  datastoreGiven: boolean;
  brokerGiven: boolean;
  /** The private stack's directory; given whenever the two URLs are not. */
  dir?: string;
  keep: boolean;
  progress: (line: string) => void;
}): Promise<BenchStack> {
  const { config } = options;
  if (options.datastoreGiven && options.brokerGiven) {
    return {
      datastoreUrl: config.datastoreUrl,
      brokerUrl: config.brokerUrl,
      privateStack: false,
      teardown: async () => {},
    };
  }
  // One URL without the other was refused with the other flag problems (run.ts), and run.ts
  // made the directory: it decides when the directory goes.
  const dir = options.dir;
  if (dir === undefined) throw new Error("a private stack needs its directory");
  options.progress(`starting private stack in ${dir}`);
  const info = await stackUp({ dir, log: (line) => options.progress(`stack: ${line}`) });
  let done = false;
  return {
    datastoreUrl: info.datastoreUrl,
    brokerUrl: info.brokerUrl,
    privateStack: true,
    teardown: async () => {
      // A stack someone else started in --dir (`matchd stack up`) is theirs to stop.
      if (done || options.keep || info.reused === true) return;
      done = true;
      options.progress("stopping private stack");
      await stackDown({ dir });
    },
  };
}

/** Starts `matchd <name>` with config flags and waits until its /readyz answers 200. */
export async function startService(
  name: "conductor" | "outbox" | "feed",
  flags: Record<string, string | number>,
  progress: (line: string) => void,
  /** Told about the service as soon as it is spawned, before it is ready. */
  register: (service: ServiceProcess) => void = () => undefined,
  /** Settings passed in the environment rather than argv (a secret must not show in `ps`). */
  env: Record<string, string> = {},
): Promise<ServiceProcess> {
  const port = (await freePorts(1))[0]!;
  // On loopback, where the bench reads it, whatever MATCHING_HTTP_HOST the bench inherited.
  const args = Object.entries({
    ...flags,
    "--http-port": port,
    "--http-host": "127.0.0.1",
  }).flatMap(([flag, value]) => [flag, String(value)]);
  const child = spawnSelf([name, ...args], {
    stdout: "ignore",
    stderr: "pipe",
    env: { ...process.env, ...env },
  });
  const logTail: string[] = [];
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      for (const line of decoder.decode(chunk).split("\n")) {
        if (!line) continue;
        logTail.push(line);
        if (logTail.length > 40) logTail.shift();
        // Warnings and errors, and every line that is no log record ("matchd: fatal: ...",
        // a crash's stack): a service that dies must say why in the bench's output.
        if (/"level":"(warn|error)"/.test(line) || !line.startsWith("{"))
          progress(`${name}: ${line.slice(0, 300)}`);
      }
    }
  })();
  const url = `http://127.0.0.1:${port}`;
  // One stop, however often asked: a second SIGTERM would end the service mid-shutdown
  // (it listens for the first one only), e.g. before the outbox released its lease.
  let stopping: Promise<number> | undefined;
  const service: ServiceProcess = {
    name,
    url,
    pid: child.pid,
    exited: child.exited,
    kill: () => child.kill("SIGKILL"),
    stop: () => {
      stopping ??= (async () => {
        child.kill("SIGTERM");
        const timeout = setTimeout(() => child.kill("SIGKILL"), 15_000);
        const code = await child.exited;
        clearTimeout(timeout);
        return code;
      })();
      return stopping;
    },
  };
  register(service);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(
        `${name} exited with ${child.exitCode} before it was ready:\n${logTail.join("\n")}`,
      );
    }
    // Bounded: a service that accepts the connection and never answers would hold the wait
    // well past its deadline (fetch's own idle timeout is minutes).
    const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) return service;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${name} not ready within 60 s:\n${logTail.join("\n")}`);
    }
    await Bun.sleep(100);
  }
}

export async function fetchMetrics(url: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/metrics`);
  if (!response.ok) throw new Error(`${url}/metrics answered ${response.status}`);
  return (await response.json()) as Record<string, unknown>;
}

/**
 * A numeric metric, or NaN when the service does not expose it: an invariant such as
 * "no retries" must fail against a service that cannot show it, not pass as if it read 0.
 */
export function metricNumber(metrics: Record<string, unknown>, key: string): number {
  const value = metrics[key];
  return typeof value === "number" ? value : Number.NaN;
}
