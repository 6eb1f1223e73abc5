/**
 * Test-only fault hooks, read once from the environment when this module loads: named points
 * where the process kills itself (`MATCHD_KILL_AT`), and a command whose application breaks
 * the engine's invariant (`MATCHD_TEST_BREAK_INVARIANT_ON`). Read here rather than through
 * the configuration in main.ts: they are no settings (no flag, no schema, never set in
 * production), and read at load an unset hook is a constant no-op instead of an option
 * threaded through every layer down to the line it guards.
 *
 * `MATCHD_KILL_AT=<point>:<N>` sends SIGKILL to the process itself at the Nth arrival (N >= 1)
 * at the named point. What surviving each point proves, once a restarted process has finished
 * the work:
 * - `before-commit` (conductor: batch decoded and matched, commit script not sent): books in
 *   memory are no state; a matched batch that never reached Valkey is simply redone.
 * - `after-commit` (conductor: commit script answered, durability wait not ended): a batch
 *   committed and never acknowledged is redelivered and answered from its stored results,
 *   not applied twice (the dedup markers are part of the atomic commit).
 * - `after-durable` (conductor: durability confirmed, broker ack and replies not sent): the
 *   same for a durable batch; its events are in the stream once.
 * - `before-reload` (conductor, in a failed batch's handling: the batch requeued, the books
 *   not yet reloaded; the "between a failover and the reload" point): the next process loads
 *   the books from Valkey, and the requeued batch is applied once.
 * - `after-publish` (outbox: publisher confirms received for a run of events, their stream
 *   entries not yet acknowledged): the run is published again, under the same event ids and
 *   with the same bytes, and nothing is lost.
 */
import { writeSync } from "node:fs";

export const killPointNames = [
  "before-commit",
  "after-commit",
  "after-durable",
  "before-reload",
  "after-publish",
] as const;

export type KillPointName = (typeof killPointNames)[number];

interface ArmedKillPoint {
  name: KillPointName;
  arrival: number;
}

/**
 * Parses `<point>:<N>`; throws on anything else, so that a misspelt point fails the process
 * at once rather than letting a test run without its crash.
 */
export function parseKillAt(value: string): ArmedKillPoint {
  const match = /^([a-z-]+):([1-9][0-9]{0,8})$/.exec(value);
  const name = match?.[1] as KillPointName | undefined;
  if (match === null || name === undefined || !killPointNames.includes(name)) {
    throw new Error(
      `MATCHD_KILL_AT=${value} is not <point>:<N> with N >= 1 and a point of ${killPointNames.join(", ")}`,
    );
  }
  return { name, arrival: Number(match[2]) };
}

function armedKillPoint(armed: ArmedKillPoint): (name: KillPointName) => void {
  let arrivals = 0;
  return (name) => {
    if (name !== armed.name || ++arrivals < armed.arrival) return;
    // Written synchronously: a buffered write would die with the process.
    writeSync(2, `matchd: kill point ${name}:${armed.arrival} reached; SIGKILL\n`);
    process.kill(process.pid, "SIGKILL");
  };
}

const killAt = process.env.MATCHD_KILL_AT;

/** Kills the process at the armed arrival at `name`; a constant no-op when nothing is armed. */
export const killPoint: (name: KillPointName) => void =
  killAt === undefined || killAt === "" ? () => undefined : armedKillPoint(parseKillAt(killAt));

/**
 * The command id whose application the conductor's engine turns into a broken invariant
 * (see run.ts), or undefined (always, in production).
 */
export const breakInvariantOn: string | undefined =
  process.env.MATCHD_TEST_BREAK_INVARIANT_ON || undefined;
