// Workload generators are deterministic and produce contract-shaped commands; the domain bench
// runs end to end on a tiny input (no timing assertions: targets live in benchmarks).

import { expect, spyOn, test } from "bun:test";
import { runDomainBench } from "../../bench/domain-bench";
import { renderReport } from "../../bench/report";
import { createWorkload, deterministicUuid, workloadNames } from "../../bench/workloads";
import { decodeCommand, MatchingEngine } from "../../src/domain/index";

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
  expect(report.invariants).toMatchObject({
    ok: true,
    eventsMatch: true,
    restingExpected: 0,
    restingMatch: true,
    nothingRefused: true,
  });
  expect(report.extra.events).toBe(4000);
  // Four batches of 500, one position in 16 timed (phases 0..3: 32 positions each).
  expect(report.extra.latencySample).toStartWith(
    "1 in 16 commands timed on its own (128 latencies);",
  );
  expect(report.latencyMs.max).toBeGreaterThan(0);
  expect(report.latencyMs.max).toBeLessThanOrEqual(report.extra.slowestBatchMs as number);
  expect(report.seconds * 1000).toBeGreaterThanOrEqual(report.extra.slowestBatchMs as number);
  expect(renderReport(report)).toContain("pure-domain");
});

test("a mixed run that got a duplicate outcome fails its invariants (its command ids are all distinct)", () => {
  const clean = runDomainBench({ workload: "mixed", commands: 2000, seed: 1, warmup: 0 });
  expect(clean.invariants).toMatchObject({ ok: true, noDuplicates: true });
  // The fault: an id index that takes one new order id for one it has seen, once, in the
  // timed commands (after the prefill's).
  const prefill = createWorkload("mixed", { seed: 1 }).prefill().length;
  const original = MatchingEngine.prototype.apply;
  let calls = 0;
  let faulted = false;
  const spy = spyOn(MatchingEngine.prototype, "apply").mockImplementation(function (
    this: MatchingEngine,
    command,
    alreadyAccepted,
  ) {
    const fault = ++calls > prefill + 100 && command.type === "order.place" && !faulted;
    if (fault) faulted = true;
    return original.call(this, command, alreadyAccepted || fault);
  });
  try {
    const faulty = runDomainBench({ workload: "mixed", commands: 2000, seed: 1, warmup: 0 });
    expect(faulted).toBe(true);
    expect(faulty.invariants).toMatchObject({ ok: false, noDuplicates: false });
  } finally {
    spy.mockRestore();
  }
});

test("the alternating and multi-pair workloads know exactly what they leave", () => {
  for (const [name, commands] of [
    ["alternating", 7],
    ["alternating", 8],
    ["multi-pair", 501],
  ] as const) {
    const workload = createWorkload(name, { seed: 3 });
    const engine = new MatchingEngine();
    let events = 0;
    for (let i = 0; i < commands; i++) events += engine.apply(workload.next(i)).events.length;
    expect({ name, commands, ...workload.expectedAfter!(commands) }).toEqual({
      name,
      commands,
      events,
      resting: engine.restingOrderCount(),
    });
  }
});

test("two partitions with one seed get different command ids (their events share the exchanges)", () => {
  const p1 = createWorkload("alternating", { seed: 1, partition: 1, partitionCount: 8 });
  const p2 = createWorkload("alternating", { seed: 1, partition: 2, partitionCount: 8 });
  const ids = new Set<string>();
  for (let i = 0; i < 100; i++) ids.add(p1.next(i).commandId).add(p2.next(i).commandId);
  expect(ids.size).toBe(200);
});
