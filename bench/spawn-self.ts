/**
 * Starts this same matchd as a child process (a service, a load generator, a stack), always on
 * the services' allocator setting: the one place a bench spawns its own binary.
 */
import type { SpawnOptions, Subprocess } from "bun";
import { withAllocatorEnv } from "../src/infra/allocator-env";

/** The command that runs this same matchd: the compiled binary, or bun + main.ts from source. */
function selfCommand(): string[] {
  return Bun.main.endsWith(".ts") ? [process.execPath, Bun.main] : [process.execPath];
}

/**
 * Runs `matchd <args>`, after `prefix` (such as `taskset -c 1`), with `env` (this process's
 * environment by default) plus allocatorEnv's settings where `env` does not set them.
 */
export function spawnSelf<
  const Out extends SpawnOptions.Readable,
  const Err extends SpawnOptions.Readable,
>(
  args: readonly string[],
  options: {
    prefix?: readonly string[];
    env?: Readonly<Record<string, string | undefined>>;
    stdout: Out;
    stderr: Err;
  },
): Subprocess<"ignore", Out, Err> {
  return Bun.spawn([...(options.prefix ?? []), ...selfCommand(), ...args], {
    stdout: options.stdout,
    stderr: options.stderr,
    env: withAllocatorEnv(options.env ?? process.env),
  });
}
