/**
 * Which subcommands read each setting's flag. A flag given to a process that never reads it
 * (`conductor --window 5`) is refused rather than silently ignored; the environment variable
 * stays accepted everywhere, since one environment file commonly serves every process.
 */
import type { Subcommand } from "./schema";

const conductorOnly = ["--batch-max", "--prefetch", "--dedup-retention-s", "--command-max-bytes"];
const outboxOnly = ["--window", "--read-count", "--claim-idle-ms", "--lease-ttl-ms"];

/** Flags each subcommand does not read (every other setting flag applies to it). */
const unread: Record<Exclude<Subcommand, "stack">, readonly string[]> = {
  conductor: outboxOnly,
  // The outbox serves no order or command query.
  outbox: [...conductorOnly, "--http-token"],
  // check runs the durability checks against the datastore and reaches the broker: no service.
  check: [...conductorOnly, ...outboxOnly, "--http-port", "--http-host", "--http-token"],
  // bench gives each service it starts a free port of its own, on loopback.
  bench: ["--http-port", "--http-host"],
  // The client commands talk to the broker and to a conductor's HTTP (--conductor-url, a
  // client flag); the partition is the pair's (pairId mod partition count).
  client: [
    ...conductorOnly,
    ...outboxOnly,
    "--http-port",
    "--http-host",
    "--datastore-url",
    "--durability",
    "--durability-timeout-ms",
    "--partition",
    // No client command logs; each names which of the rest it reads (cli/client/options.ts).
    "--log-level",
  ],
};

/** True when `subcommand` reads the setting behind `flag`. */
export function readsFlag(subcommand: Exclude<Subcommand, "stack">, flag: string): boolean {
  return !unread[subcommand].includes(flag);
}

const readers = (flag: string): string =>
  (Object.keys(unread) as (keyof typeof unread)[])
    .filter((subcommand) => readsFlag(subcommand, flag))
    .join(", ");

export function flagsOutsideScope(
  subcommand: Exclude<Subcommand, "stack">,
  flags: ReadonlyMap<string, string>,
): string[] {
  return [...flags.keys()]
    .filter((flag) => !readsFlag(subcommand, flag))
    .map((flag) => `${flag} does not apply to ${subcommand} (read by: ${readers(flag)})`);
}
