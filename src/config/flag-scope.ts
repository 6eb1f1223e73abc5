/**
 * Which subcommands read each setting's flag, as the schema declares it (`readBy`,
 * `readByClients`). A flag given to a process that never reads it (`conductor --window 5`)
 * is refused rather than silently ignored; the environment variable stays accepted
 * everywhere, since one environment file commonly serves every process.
 */
import { clientCommandNames, type Subcommand, settings } from "./schema";

/** Each setting's flag and readers, widened for lookups. */
const scopes = settings.map((s) => ({
  flag: s.flag as string,
  readBy: s.readBy as readonly string[],
  clients: ("readByClients" in s ? s.readByClients : []) as readonly string[],
}));

/** The setting flags each client command reads (its other setting flags are refused). */
export const clientSettingsRead: Record<string, readonly string[]> = Object.fromEntries(
  clientCommandNames.map((command) => [
    command,
    scopes.filter((s) => s.clients.includes(command)).map((s) => s.flag),
  ]),
);

/** True when `subcommand` reads the setting behind `flag` ("client": any client command). */
export function readsFlag(subcommand: Exclude<Subcommand, "stack">, flag: string): boolean {
  const scope = scopes.find((s) => s.flag === flag);
  if (scope === undefined) return true;
  if (subcommand === "client") return scope.clients.length > 0;
  return scope.readBy.includes(subcommand);
}

const readers = (flag: string): string =>
  (["conductor", "outbox", "feed", "check", "bench", "client"] as const)
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
