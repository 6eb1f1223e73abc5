/**
 * The real servers integration tests talk to: the stack that the test command started
 * (its URLs in the environment), or else a private stack started once for this run.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { stackDown, stackUp } from "../../src/stack/index";
import { tempDir } from "./temp-dir";

export interface TestStack {
  datastoreUrl: string;
  replicaUrl: string;
  brokerUrl: string;
}

/**
 * For a hook that waits for testStack(): a private stack, started when the environment names
 * none, can take long on a busy machine, and a hook cut short stops it mid-start, failing
 * every test of the file (bun's default, 5 s, is raised to 60 s in the preload).
 */
export const stackStartTimeoutMs = 120_000;

let started: Promise<TestStack> | undefined;
/** The directory of the private stack this run started, if it started one. */
let privateStackDir: string | undefined;

export function testStack(): Promise<TestStack> {
  started ??= resolveStack();
  return started;
}

async function resolveStack(): Promise<TestStack> {
  const { MATCHING_DATASTORE_URL, MATCHING_REPLICA_URL, MATCHING_BROKER_URL } = process.env;
  if (MATCHING_DATASTORE_URL && MATCHING_REPLICA_URL && MATCHING_BROKER_URL) {
    return {
      datastoreUrl: MATCHING_DATASTORE_URL,
      replicaUrl: MATCHING_REPLICA_URL,
      brokerUrl: MATCHING_BROKER_URL,
    };
  }
  const dir = tempDir("matchd-test-stack-");
  privateStackDir = dir;
  const info = await stackUp({ dir });
  return {
    datastoreUrl: info.datastoreUrl,
    replicaUrl: info.replicaUrl,
    brokerUrl: info.brokerUrl,
  };
}

/**
 * Stops and removes the private stack this run started, if any: the test preload calls it
 * after the last test file. (bun test does not run process "exit" handlers, which this used.)
 */
export async function stopPrivateStack(): Promise<void> {
  const dir = privateStackDir;
  if (dir === undefined) return;
  privateStackDir = undefined;
  await started?.catch(() => undefined);
  await stackDown({ dir });
  rmSync(dir, { recursive: true, force: true });
}

/** A partition number no other test in this run uses, so keys and queues never collide. */
let nextPartition = 100 + Math.floor(Math.random() * 400) * 2;
export function uniquePartition(): number {
  nextPartition += 1;
  return nextPartition;
}

/** The command used to run matchd from source in tests (always the current code). */
export const matchdCommand = [
  join(import.meta.dir, "../../node_modules/.bin/bun"),
  join(import.meta.dir, "../../src/main.ts"),
];

/** Starts `matchd <args>` from source with a minimal environment, collecting its stderr. */
export function spawnMatchd(
  args: string[],
  env: Record<string, string>,
): { child: Bun.Subprocess<"ignore", "ignore", "pipe">; log: () => string } {
  const child = Bun.spawn([...matchdCommand, ...args], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", MATCHING_LOG_LEVEL: "info", ...env },
    stdin: "ignore",
    // Logs go to stderr; nothing reads stdout, so it must not fill a pipe.
    stdout: "ignore",
    stderr: "pipe",
  });
  let log = "";
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) log += decoder.decode(chunk);
  })();
  return { child, log: () => log };
}

/** GET /metrics as JSON; throws unless it answers 200. */
export async function metricsJson(metricsUrl: string): Promise<Record<string, unknown>> {
  const response = await fetch(metricsUrl);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return (await response.json()) as Record<string, unknown>;
}
