// The "pure domain" boundary benchmark: the matching engine in-process, no I/O, commands
// generated outside the timed region, a sample of apply() calls timed, state checked at the end.

import { type CommandEnvelope, type CommandOutcome, MatchingEngine } from "../src/domain/index";
import { intFlag } from "./boundary";
import { environmentFacts, machineEnvironment } from "./environment";
import { LatencyHistogram } from "./histogram";
import { type BenchReport, renderReport } from "./report";
import { createWorkload, DOMAIN_CLOCK, type Workload } from "./workloads";

export interface DomainBenchOptions {
  workload: string;
  commands: number;
  seed: number;
  warmup: number;
}

/**
 * Commands are generated in batches outside the timed region so generation cost is not counted.
 * A batch is the conductor's default commit batch (500): like a conductor, the bench then holds
 * a few hundred decoded commands at a time. A batch of 8,192 (before 2026-11-30) kept ~5 MB of
 * commands live in the young generation and out of the core's cache, which cost the timed
 * region 15-30 % in side-by-side runs: a cost of the bench's layout, not of the engine.
 */
const BATCH = 500;

/**
 * One command in LATENCY_STRIDE is timed on its own (two clock reads); the rest run between
 * them untimed. A clock read costs 45-70 ns here, and without a read at every command
 * boundary an alternating run went 13-15 % faster (bench/clock-cost.ts, 2026-11-30): harness
 * cost, not the engine's. Which position of each stride is timed rotates with the
 * batch, so a workload with a period (alternating: bid, ask) has every kind sampled. The
 * percentiles are those of the sample; the slowest batch bounds every command's latency.
 */
const LATENCY_STRIDE = 16;

const now = (): number => Bun.nanoseconds();

/** The machine's facts for an in-process report (no servers are involved). */
const machineFacts = (): Record<string, string> =>
  Object.fromEntries(environmentFacts(machineEnvironment()));

/** Runs `warmup` commands on an engine and workload of their own, so the timed run starts fresh. */
function warmUp(name: string, seed: number, warmup: number): void {
  if (warmup <= 0) return;
  const warm = new MatchingEngine();
  const warmWorkload = createWorkload(name, { seed: seed + 1, clock: DOMAIN_CLOCK });
  for (const command of warmWorkload.prefill()) warm.apply(command);
  for (let i = 0; i < warmup; i++) {
    if (i % BATCH === 0 && warmWorkload.tick !== undefined) warm.apply(warmWorkload.tick(i));
    warm.apply(warmWorkload.next(i));
  }
}

/**
 * Applies `commands` of the workload in batches made before each batch's timed region, one
 * command in LATENCY_STRIDE timed on its own (a different one in each batch).
 */
function timeCommands(engine: MatchingEngine, workload: Workload, commands: number) {
  const histogram = new LatencyHistogram();
  const counts = { events: 0, accepted: 0, rejected: 0, duplicate: 0, deals: 0, ticks: 0 };
  let timedNs = 0;
  let slowestBatchNs = 0;
  let sampled = 0;
  const batch: CommandEnvelope[] = new Array(BATCH);
  // The sampled latencies of one batch, fed to the histogram after the batch's timed region.
  const latencies = new Float64Array(Math.ceil(BATCH / LATENCY_STRIDE));
  for (let start = 0, batchIndex = 0; start < commands; start += BATCH, batchIndex++) {
    const size = Math.min(BATCH, commands - start);
    for (let k = 0; k < size; k++) batch[k] = workload.next(start + k);
    const phase = batchIndex % LATENCY_STRIDE;
    let timed = 0;
    const tick = workload.tick?.(start);
    const batchStart = now();
    // As a conductor does before each batch: the clock, and whatever it expires or fires.
    if (tick !== undefined) {
      counts.events += engine.apply(tick).events.length;
      counts.ticks++;
    }
    for (let k = 0; k < size; k++) {
      let outcome: CommandOutcome;
      if (k % LATENCY_STRIDE === phase) {
        const commandStart = now();
        outcome = engine.apply(batch[k]!);
        latencies[timed++] = now() - commandStart;
      } else {
        outcome = engine.apply(batch[k]!);
      }
      counts.events += outcome.events.length;
      counts[outcome.result.status]++;
    }
    const batchNs = now() - batchStart;
    timedNs += batchNs;
    if (batchNs > slowestBatchNs) slowestBatchNs = batchNs;
    for (let k = 0; k < timed; k++) histogram.record(latencies[k]!);
    sampled += timed;
  }
  return { histogram, counts, timedNs, slowestBatchNs, sampled };
}

/**
 * Workloads without an exact expectation (mixed) are checked by the book check and by their
 * command ids, all distinct, so no command may come back a duplicate (a false duplicate would
 * be an id index fault); their accepted and rejected counts are reported beside.
 */
function domainInvariants(
  counts: { events: number; rejected: number; duplicate: number },
  resting: number,
  exact: { events: number; resting: number } | undefined,
): BenchReport["invariants"] {
  const noDuplicates = counts.duplicate === 0;
  const invariants: BenchReport["invariants"] = {
    ok: noDuplicates,
    checkPassed: true,
    noDuplicates,
  };
  if (exact === undefined) return invariants;
  // Exactly the events and resting orders the workload implies, and no command refused:
  // a sum alone (events + resting) would let a missing event hide behind an extra order.
  invariants.eventsExpected = exact.events;
  invariants.eventsMatch = counts.events === exact.events;
  invariants.restingExpected = exact.resting;
  invariants.restingMatch = resting === exact.resting;
  // Nothing refused covers no duplicates too.
  invariants.nothingRefused = counts.rejected === 0 && noDuplicates;
  invariants.ok = invariants.eventsMatch && invariants.restingMatch && invariants.nothingRefused;
  return invariants;
}

export function runDomainBench(options: DomainBenchOptions): BenchReport {
  const { workload: name, commands, seed, warmup } = options;
  warmUp(name, seed, warmup);
  Bun.gc(true);
  const engine = new MatchingEngine();
  const workload = createWorkload(name, { seed, clock: DOMAIN_CLOCK });
  for (const command of workload.prefill()) engine.apply(command);
  const prefilled = engine.restingOrderCount();
  const { histogram, counts, timedNs, slowestBatchNs, sampled } = timeCommands(
    engine,
    workload,
    commands,
  );
  // check() throws on a broken book, so a report exists only when it passed.
  engine.check();
  const resting = engine.restingOrderCount();
  const seconds = timedNs / 1e9;
  const invariants = domainInvariants(counts, resting, workload.expectedAfter?.(commands));
  const memory = process.memoryUsage();
  return {
    boundary: "pure-domain",
    boundaryStatement:
      "deterministic trade calculation only: MatchingEngine.apply in-process; no decoding, I/O, durability or publication",
    durability: "none (in-memory)",
    workload: name,
    workloadDescription: workload.description,
    commands,
    warmup,
    seconds,
    commandsPerSecond: commands / seconds,
    latencyMs: histogram.percentilesMs(),
    invariants,
    environment: machineFacts(),
    extra: {
      seed,
      generationBatch: BATCH,
      latencySample: `1 in ${LATENCY_STRIDE} commands timed on its own (${sampled} latencies); latencyMs, max included, is of this sample, so a stall in an untimed command is missed: slowestBatchMs bounds every command`,
      slowestBatchMs: slowestBatchNs / 1e6,
      events: counts.events,
      eventsPerCommand: counts.events / commands,
      accepted: counts.accepted,
      rejected: counts.rejected,
      duplicate: counts.duplicate,
      // Applied in the timed region, one before each batch, as a conductor does.
      clockTicks: counts.ticks,
      prefilledOrders: prefilled,
      restingOrders: resting,
      digest: engine.digest(),
      rssMiB: memory.rss / 2 ** 20,
      heapUsedMiB: memory.heapUsed / 2 ** 20,
    },
  };
}

/** Loads `orders` resting limit orders (spread over 10,000 bid levels) and reports memory. */
export function runRestingMemoryBench(orders = 1_000_000): BenchReport {
  Bun.gc(true);
  const before = process.memoryUsage().rss;
  const engine = new MatchingEngine();
  const started = now();
  for (let i = 0; i < orders; i++) {
    engine.loadRestingOrder({
      id: `r-${i}`,
      userId: `u${i % 1000}`,
      pairId: 1,
      side: "bid",
      price: String(1000 + (i % 10_000)),
      volume: "1.5",
      volumeTotal: "2",
      timestamp: 1_704_067_200_000 + i,
      sequence: i + 1,
      priceDecimals: 2,
      amountDecimals: 8,
      quoteDecimals: 8,
      stp: "none",
    });
  }
  const seconds = (now() - started) / 1e9;
  Bun.gc(true);
  const memory = process.memoryUsage();
  engine.check();
  const rssMiB = memory.rss / 2 ** 20;
  return {
    boundary: "pure-domain",
    boundaryStatement: "memory of resting orders held by MatchingEngine (loadRestingOrder)",
    durability: "none (in-memory)",
    workload: "resting-memory",
    commands: orders,
    warmup: 0,
    seconds,
    commandsPerSecond: orders / seconds,
    // Loading is not timed per order: -1 marks latencies that were not measured.
    latencyMs: { p50: -1, p95: -1, p99: -1, p999: -1, max: -1 },
    invariants: {
      ok: rssMiB < 1024 && engine.restingOrderCount() === orders,
      rssBelow1GiB: rssMiB < 1024,
      everyOrderResting: engine.restingOrderCount() === orders,
      checkPassed: true,
    },
    environment: machineFacts(),
    extra: {
      restingOrders: engine.restingOrderCount(),
      rssMiB,
      rssBeforeMiB: before / 2 ** 20,
      heapUsedMiB: memory.heapUsed / 2 ** 20,
      bytesPerOrder: (memory.rss - before) / orders,
    },
  };
}

/** CLI: bun bench/domain-bench.ts [workload] [commands] [--resting N]. */
if (import.meta.main) {
  const args = process.argv.slice(2);
  const restingAt = args.indexOf("--resting");
  if (restingAt >= 0) {
    console.log(renderReport(runRestingMemoryBench(Number(args[restingAt + 1] ?? 1_000_000))));
  } else {
    const workload = args[0] ?? "alternating";
    const commands = Number(args[1] ?? 1_000_000);
    console.log(renderReport(runDomainBench({ workload, commands, seed: 42, warmup: 50_000 })));
  }
}

/** `matchd bench domain` with its flags: the workload timed, or resting orders' memory. */
export function domainReport(flags: ReadonlyMap<string, string>): BenchReport {
  const resting = intFlag(flags, "--resting", 0);
  if (resting > 0) return runRestingMemoryBench(resting);
  const workload = flags.get("--workload") ?? "alternating";
  // Sweep: 2,000 cycles of 101 commands, a timed window of a tenth of a second or more (20,000
  // commands gave windows of ~40 ms, within the machine's noise).
  const commands = intFlag(flags, "--commands", workload === "sweep" ? 202_000 : 1_000_000);
  const warmup = intFlag(flags, "--warmup", 100_000);
  return runDomainBench({ workload, commands, seed: intFlag(flags, "--seed", 1), warmup });
}
