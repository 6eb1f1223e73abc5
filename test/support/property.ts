// Seeded property runs shared by the differential tests: one seed per process (fresh unless
// MATCHD_PROPERTY_SEED replays one), MATCHD_PROPERTY_RUNS to scale them, and the replay
// line printed when a property fails.

import fc from "fast-check";

const replaySeed = process.env.MATCHD_PROPERTY_SEED;

export const propertySeed =
  replaySeed !== undefined ? Number(replaySeed) : (Date.now() ^ (Math.random() * 2 ** 31)) >>> 0;

/** Runs `property` with the shared seed; `runs` unless MATCHD_PROPERTY_RUNS says otherwise. */
export function assertProperty<T>(name: string, property: fc.IProperty<T>, runs: number): void {
  try {
    fc.assert(property, {
      seed: propertySeed,
      numRuns: Math.max(1, Number(process.env.MATCHD_PROPERTY_RUNS) || runs),
    });
  } catch (error) {
    console.error(`${name} failed; replay with MATCHD_PROPERTY_SEED=${propertySeed}`);
    throw error;
  }
}
