/**
 * What each durability policy asks of the services, in one place: whether a commit waits for
 * replicas' fsyncs (and for how long at most), and so whether the replica rule is watched.
 */
import type { Config } from "../config/schema";

/** The bound on every durability wait, or undefined under `memory`: nothing waits. */
export function durabilityWaitMs(
  config: Pick<Config, "durability" | "durabilityTimeoutMs">,
): number | undefined {
  return waitsForReplicas(config) ? config.durabilityTimeoutMs : undefined;
}

/** `aof-replicated`: a commit counts once fsynced on the primary and its replicas. */
export function waitsForReplicas(config: Pick<Config, "durability">): boolean {
  return config.durability === "aof-replicated";
}
