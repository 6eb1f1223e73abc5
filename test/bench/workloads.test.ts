// Workload generators are deterministic and produce contract-shaped commands; the domain bench
// runs end to end on a tiny input (no timing assertions: targets live in benchmarks).

import { expect, test } from "bun:test";
import { runDomainBench } from "../../src/bench/domain-bench";
import { renderReport } from "../../src/bench/report";
import { createWorkload, deterministicUuid, workloadNames } from "../../src/bench/workloads";
import { decodeCommand } from "../../src/domain/index";

test.each([...workloadNames])("%s is deterministic and decodes", (name) => {
  const a = createWorkload(name, { seed: 3 });
  const b = createWorkload(name, { seed: 3 });
  expect(JSON.stringify(a.prefill())).toBe(JSON.stringify(b.prefill()));
  for (let i = 0; i < 500; i++) {
    const command = a.next(i);
    expect(JSON.stringify(command)).toBe(JSON.stringify(b.next(i)));
    expect(decodeCommand(command).ok).toBe(true);
  }
});

test("partitioned workloads only use pairs of their partition", () => {
  const w = createWorkload("multi-pair", { partition: 2, partitionCount: 4, pairs: 5 });
  expect(w.pairIds.every((p) => p % 4 === 2)).toBe(true);
});

test("deterministic UUIDs are UUID-shaped and distinct", () => {
  const ids = new Set(Array.from({ length: 1000 }, (_, i) => deterministicUuid(1, 0, i)));
  expect(ids.size).toBe(1000);
  for (const id of ids)
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

test("runDomainBench reports invariants for a short alternating run", () => {
  const report = runDomainBench({ workload: "alternating", commands: 2000, seed: 1, warmup: 100 });
  expect(report.invariants).toMatchObject({ ok: true, eventsMatch: true, bookEmpty: true });
  expect(report.extra.events).toBe(4000);
  expect(renderReport(report)).toContain("pure-domain");
});
