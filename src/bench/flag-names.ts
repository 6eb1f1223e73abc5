/**
 * The bench's own valued flags (beside the configuration's): the argument parser takes their
 * values, and a boundary refuses those it would ignore.
 */
export const benchValuedFlags: readonly string[] = [
  "--workload",
  "--commands",
  "--events",
  "--seed",
  "--warmup",
  "--rate",
  "--duration",
  "--connections",
  "--resting",
  "--dir",
  "--report",
  "--conductor-url",
  "--outbox-url",
  "--flow",
  "--sink",
  "--query-load",
  "--boundary",
  "--p99-ms",
  "--step-seconds",
  "--fault",
  "--faults",
  "--fault-interval",
  "--rounds",
  "--series",
  "--sample-seconds",
  "--restart-replica-at",
  "--cells",
];
