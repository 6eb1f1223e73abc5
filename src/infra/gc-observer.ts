/**
 * Counts garbage collections as the process sees them: a sentinel object nobody holds is
 * registered for finalization, and each time a collection reclaims it another is planted.
 * Collections that run before the callback has planted the next one are not seen, so the
 * count is a lower bound; it shows whether a measured window crossed collections at all.
 */
import type { MetricsRegistry } from "./metrics";

export const gcMetricName = "matching_gc_collections_observed_total";

/** Held for the process's life: a registry nobody holds is collected, and calls nothing. */
const registries = new Set<FinalizationRegistry<undefined>>();

/** Calls `onCollected` after each observed collection; returns a stop function. */
export function observeCollections(onCollected: () => void): () => void {
  let stopped = false;
  const registry = new FinalizationRegistry<undefined>(() => {
    if (stopped) return;
    onCollected();
    plant();
  });
  registries.add(registry);
  const plant = () => registry.register({}, undefined);
  plant();
  return () => {
    stopped = true;
    registries.delete(registry);
  };
}

/** The count as a counter of a service's /metrics, beside the heap it collects. */
export function countCollections(metrics: MetricsRegistry): () => void {
  const counter = metrics.counter(
    gcMetricName,
    "Garbage collections observed (a lower bound: a sentinel object reclaimed and replaced)",
  );
  // Read at each scrape: a soak run plots it to tell a leak from a heap that settles.
  metrics.gauge(
    "matching_process_heap_used_bytes",
    "The JavaScript heap in use (process.memoryUsage().heapUsed)",
    () => process.memoryUsage().heapUsed,
  );
  return observeCollections(() => counter.inc());
}
