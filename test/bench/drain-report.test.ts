// The outbox-drain report's invariants: every event received once, and published once (a copy
// republished after a failed stream acknowledgement counts no retry and may reach the sink only
// after the counts were read, so only the outbox's publish count shows it).

import { expect, test } from "bun:test";
import { outboxDrainToReport } from "../../bench/outbox-drain-report";
import { renderReport } from "../../bench/report";
import { resolveConfig } from "../../src/config/resolve";

const resolved = resolveConfig({}, new Map(), "bench");
if (!resolved.ok) throw new Error(resolved.problems.join("\n"));
const config = resolved.config;

const drained = (published: number, overrides: Record<string, unknown> = {}) => ({
  drainSeconds: 5,
  eventsPerSecond: 20_000,
  received: 100_000,
  duplicates: 0,
  foreignMessages: 0,
  publishRetries: 0,
  deadLetters: 0,
  unroutable: 0,
  published,
  durabilityTimeouts: 0,
  replicaSamples: 20,
  minReplicasConnected: 1,
  confirmLatencySeconds: { p50: 0.1, p95: 0.2, p99: 0.2, p999: 0.25, max: 0.25 },
  ...overrides,
});

test("a drain passes only when every event was published once and received once", () => {
  const clean = outboxDrainToReport(drained(100_000), config, {}, 100_000);
  expect(clean.invariants).toMatchObject({ ok: true, eventsPublished: 100_000 });
  const republished = outboxDrainToReport(drained(100_001), config, {}, 100_000);
  expect(republished.invariants).toMatchObject({ ok: false, eventsPublished: 100_001 });
});

test("the drain's report counts events, not commands", () => {
  const report = outboxDrainToReport(drained(100_000), config, {}, 100_000);
  expect(report.unit).toBe("events");
  const text = renderReport(report);
  expect(text).toContain("events/s");
  expect(text).not.toContain("commands/s");
});

test("a drain that stalled on durability, lost its replica, or could not show either fails", () => {
  expect(config.durability).toBe("aof-replicated");
  const failing: Record<string, unknown>[] = [
    { durabilityTimeouts: 1 },
    { minReplicasConnected: 0 },
    { replicaSamples: 0, minReplicasConnected: undefined },
    { durabilityTimeouts: undefined },
  ];
  for (const overrides of failing) {
    const report = outboxDrainToReport(drained(100_000, overrides), config, {}, 100_000);
    expect(report.invariants.ok).toBe(false);
  }
  const clean = outboxDrainToReport(drained(100_000), config, {}, 100_000);
  expect(clean.invariants).toMatchObject({
    ok: true,
    outboxDurabilityTimeouts: 0,
    replicaConnectedThroughout: true,
  });
});
