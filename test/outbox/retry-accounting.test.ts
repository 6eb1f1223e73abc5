/**
 * How the delivery loop paces and counts its retries, with the stream, lease and publisher as
 * stubs (the faults: reads that fail, a nack at a chosen moment, another consumer's pending
 * entries) so each case happens exactly when it must: a failure after a long healthy stretch
 * starts the backoff over, and a nack that arrives while a session ends for another reason is
 * still a counted, backed-off broker retry.
 */
import { expect, test } from "bun:test";
import type { Logger } from "../../src/infra/log";
import { MetricsRegistry } from "../../src/infra/metrics";
import { DeliveryLoop } from "../../src/outbox/delivery";
import type { PartitionLease } from "../../src/outbox/lease";
import { createOutboxMetrics } from "../../src/outbox/metrics";
import type { ConfirmOutcome, EventPublisher } from "../../src/outbox/publisher";
import type { OutboxStream } from "../../src/outbox/stream-reader";
import { eventually } from "./helpers";

interface StubEntry {
  id: string;
  fields: string[];
}

let sequence = 0;
function entry(): StubEntry {
  sequence++;
  const event = { eventId: `c${sequence}:0:order.rested.v1`, type: "order.rested.v1" };
  return { id: `${sequence}-0`, fields: ["event", JSON.stringify(event)] };
}

/** A stream whose new reads come from `readNew`; nothing else is pending anywhere. */
function stubStream(readNew: () => Promise<{ entries: StubEntry[]; othersPending: number }>) {
  return {
    group: "matching-outbox-v1",
    ensureGroup: async () => false,
    forgetIdleConsumers: async () => 0,
    claimIdle: async () => 0,
    othersPending: async () => 0,
    readOwnPending: async () => ({ entries: [], vanished: [], lastId: null }),
    readNewOn: async () => ({ ...(await readNew()), durable: async () => undefined }),
    acknowledge: async () => undefined,
    deadLetter: async () => undefined,
    recordAttempts: async () => undefined,
  } as unknown as OutboxStream;
}

const heldLease = {
  held: () => true,
  ttl: 10_000,
  resign: async () => undefined,
} as unknown as PartitionLease;

/** A publisher that answers each publish with `answer(publishNumber)`'s outcome after `delayMs`. */
function stubPublisher(answer: (n: number) => ConfirmOutcome, delayMs = 0) {
  let published = 0;
  return {
    failed: null,
    blockedReason: null,
    onFailure: () => undefined,
    drained: () => Promise.resolve(),
    close: async () => undefined,
    publish(_event: unknown, onConfirm: (outcome: ConfirmOutcome) => void): boolean {
      const outcome = answer(published++);
      setTimeout(() => onConfirm(outcome), delayMs);
      return true;
    },
  } as unknown as EventPublisher;
}

/** A logger that keeps each "outbox retrying after backoff" line's attempt number. */
function retryLog(): { log: Logger; attempts: number[] } {
  const attempts: number[] = [];
  const quiet = () => undefined;
  const log = {
    debug: quiet,
    warn: quiet,
    error: quiet,
    info: (message: string, fields?: Record<string, unknown>) => {
      if (message === "outbox retrying after backoff") attempts.push(fields?.attempt as number);
    },
  } as unknown as Logger;
  return { log, attempts };
}

function deliveryLoop(stream: OutboxStream, publisher: EventPublisher, log: Logger) {
  const registry = new MetricsRegistry();
  const loop = new DeliveryLoop({
    stream,
    lease: heldLease,
    metrics: createOutboxMetrics(registry, () => 0),
    log,
    openPublisher: async () => publisher,
    window: 10,
    readCount: 10,
    claimIdleMs: 1000,
    readBlockMs: 100,
    healthySessionMs: 300,
  });
  void loop.start();
  const retries = () => registry.toJson().matching_outbox_publish_retries_total as number;
  return { loop, retries };
}

test("a failure after a healthy stretch under steady load starts the backoff over", async () => {
  let failuresLeft = 4;
  // Under steady load every read brings an entry, so no empty read ever resets the backoff.
  const stream = stubStream(async () => {
    await Bun.sleep(5);
    if (failuresLeft > 0) {
      failuresLeft--;
      throw new Error("datastore hiccup");
    }
    return { entries: [entry()], othersPending: 0 };
  });
  const { log, attempts } = retryLog();
  const { loop } = deliveryLoop(
    stream,
    stubPublisher(() => "ack"),
    log,
  );
  try {
    await eventually("four retries", () => attempts.length === 4, 20_000);
    expect(attempts).toEqual([1, 2, 3, 4]);
    // Past the fourth backoff, a session reads and publishes, for longer than a healthy one.
    const before = sequence;
    await eventually("publishing again", () => sequence > before, 20_000);
    await Bun.sleep(600);
    failuresLeft = 1;
    await eventually("the next retry", () => attempts.length === 5, 5_000);
    expect(attempts[4]).toBe(1);
  } finally {
    await loop.stop();
  }
});

test("a nack while a session ends on another consumer's pending entries is a counted, backed-off broker retry", async () => {
  let reads = 0;
  // The first read brings one entry; the second finds another consumer's pending entries.
  const stream = stubStream(async () => {
    reads++;
    if (reads === 1) return { entries: [entry()], othersPending: 0 };
    if (reads === 2) return { entries: [], othersPending: 1 };
    await Bun.sleep(50);
    return { entries: [], othersPending: 0 };
  });
  const { log, attempts } = retryLog();
  // The first publish is nacked once the session is already ending.
  const publisher = stubPublisher((n) => (n === 0 ? "nack" : "ack"), 50);
  const { loop, retries } = deliveryLoop(stream, publisher, log);
  try {
    await eventually("the retry", () => attempts.length === 1, 5_000);
    expect(retries()).toBe(1);
  } finally {
    await loop.stop();
  }
});

test("a holder cut off from the broker counts its time cut off afresh after losing and retaking the lease", async () => {
  let held = true;
  const resigned: number[] = [];
  const lease = {
    held: () => held,
    ttl: 200,
    resign: async (forMs: number) => {
      resigned.push(forMs);
    },
  } as unknown as PartitionLease;
  let opens = 0;
  const registry = new MetricsRegistry();
  const loop = new DeliveryLoop({
    stream: stubStream(async () => ({ entries: [], othersPending: 0 })),
    lease,
    metrics: createOutboxMetrics(registry, () => 0),
    log: retryLog().log,
    openPublisher: async () => {
      opens++;
      throw new Error("broker unreachable");
    },
    window: 10,
    readCount: 10,
    claimIdleMs: 1000,
    readBlockMs: 100,
  });
  void loop.start();
  try {
    await eventually("a failed open", () => opens >= 1);
    // The lease passes away before three TTLs (600 ms) of failed opens, and comes back later.
    held = false;
    loop.leaseChanged(false);
    await Bun.sleep(700);
    const before = opens;
    held = true;
    loop.leaseChanged(true);
    await eventually("a failed open under the retaken lease", () => opens > before, 5_000);
    // Its first failure under the new lease is no reason to hand that lease over.
    expect(resigned).toEqual([]);
  } finally {
    await loop.stop();
  }
});
