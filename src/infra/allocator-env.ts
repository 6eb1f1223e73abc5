/**
 * The environment matchd's services should start with, for Bun's native allocator (mimalloc).
 * Read once at process start, so it cannot be set from inside: the stack's env file, the
 * Docker image and the bench's services carry it.
 */

/**
 * `MIMALLOC_PURGE_DELAY=-1`: freed pages stay with the process for reuse instead of being
 * returned to the kernel 10 ms later. Each return is an `madvise` whose TLB flush interrupts
 * the other CPUs: about 270 calls a second in a conductor at 1,000 commands/s. Without them,
 * the conductor used 16 % less CPU, the outbox 21 % less (docs/benchmarks.md). The cost: the
 * process keeps its peak of freed native memory resident.
 */
export const allocatorEnv: Readonly<Record<string, string>> = { MIMALLOC_PURGE_DELAY: "-1" };

/** `env` with allocatorEnv's settings added where `env` does not set them itself. */
export function withAllocatorEnv(
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string | undefined> {
  return { ...allocatorEnv, ...env };
}

/** How the running process's allocator was set, for its boot log. */
export function allocatorSetting(env = process.env): string {
  const delay = env.MIMALLOC_PURGE_DELAY;
  return delay === undefined
    ? "MIMALLOC_PURGE_DELAY unset (10 ms)"
    : `MIMALLOC_PURGE_DELAY=${delay}`;
}
