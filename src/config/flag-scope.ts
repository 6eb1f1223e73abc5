/**
 * Which subcommands read each setting's flag. A flag given to a process that never reads it
 * (`conductor --window 5`) is refused rather than silently ignored; the environment variable
 * stays accepted everywhere, since one environment file commonly serves every process.
 */
import { configFlags, type Subcommand } from "./schema";

const conductorOnly = [
  "--batch-max",
  "--prefetch",
  "--dedup-retention-s",
  "--expected-rate",
  "--command-max-bytes",
];
/** Read by the conductor alone: the bench starts its conductors without pair commands. */
const operatorOnly = ["--operator-users"];
/** The conductor's settings that check reads too: it states what the dedup window costs. */
const sizing = ["--dedup-retention-s", "--expected-rate"];
const outboxOnly = ["--window", "--read-count", "--claim-idle-ms", "--lease-ttl-ms"];

/**
 * The settings each client command reads (its other setting flags are refused): the broker's
 * for those that speak AMQP, the token for the query that needs it; `book` reads none.
 */
export const clientSettingsRead: Record<string, readonly string[]> = {
  "order place": ["--broker-url", "--partition-count"],
  "order cancel": ["--broker-url", "--partition-count"],
  "order amend": ["--broker-url", "--partition-count"],
  // Without --pair it names its partition.
  "order cancel-all": ["--broker-url", "--partition-count", "--partition"],
  "pair halt": ["--broker-url", "--partition-count"],
  "pair resume": ["--broker-url", "--partition-count"],
  events: ["--broker-url"],
  book: [],
  result: ["--http-token"],
};

const readByAClient = new Set(Object.values(clientSettingsRead).flat());

/** Flags each subcommand does not read (every other setting flag applies to it). */
const unread: Record<Exclude<Subcommand, "stack">, readonly string[]> = {
  conductor: outboxOnly,
  // The outbox serves no order or command query.
  outbox: [...conductorOnly, ...operatorOnly, "--http-token"],
  // check runs the durability checks against the datastore and reaches the broker: no service.
  check: [
    ...conductorOnly.filter((flag) => !sizing.includes(flag)),
    ...operatorOnly,
    ...outboxOnly,
    "--http-port",
    "--http-host",
    "--http-token",
    "--boot-wait-s",
  ],
  // bench gives each service it starts a free port of its own, on loopback.
  bench: ["--http-port", "--http-host", "--boot-wait-s", ...operatorOnly],
  // What no client command reads; each one's own list is clientSettingsRead.
  client: [...configFlags].filter((flag) => !readByAClient.has(flag)),
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
