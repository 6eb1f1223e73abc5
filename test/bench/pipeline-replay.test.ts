/**
 * The wall-clock run's deadline check: an expiry or a switch counts as on time only when its
 * tick is the first batch whose time reached the deadline.
 */
import { describe, expect, test } from "bun:test";
import { deadlinesMet } from "../../bench/pipeline-replay";
import type { EventEnvelope } from "../../src/domain/types";

function tickEvent(atMs: number, type: EventEnvelope["type"], payload: Record<string, unknown>) {
  const commandId = `clock.tick:5:${atMs}`;
  return {
    schemaVersion: 1,
    eventId: `${commandId}:0:${type}`,
    type,
    partition: 5,
    pairId: 1,
    commandId,
    correlationId: "",
    ordinal: 0,
    occurredAt: new Date(atMs).toISOString(),
    payload,
  } satisfies EventEnvelope;
}

describe("deadlines against the recorded batch times", () => {
  const batches = [1_000, 1_040, 1_100, 1_250];

  test("in the first batch at or past the deadline: on time, a deadline met exactly included", () => {
    const events = [
      tickEvent(1_100, "order.expired.v1", { expireAt: 1_041 }),
      tickEvent(1_040, "order.expired.v1", { expireAt: 1_040 }),
      tickEvent(1_250, "session.triggered.v1", { triggerAt: 1_200 }),
    ];
    expect(deadlinesMet(events, batches)).toEqual({ expired: 2, switched: 1, notInFirstBatch: 0 });
  });

  test("a batch that reached the deadline and let it be is caught, as is an early one", () => {
    const late = tickEvent(1_250, "order.expired.v1", { expireAt: 1_090 });
    const lateSwitch = tickEvent(1_100, "session.triggered.v1", { triggerAt: 1_000 });
    const early = tickEvent(1_040, "order.expired.v1", { expireAt: 1_041 });
    expect(deadlinesMet([late, lateSwitch, early], batches)).toEqual({
      expired: 2,
      switched: 1,
      notInFirstBatch: 3,
    });
  });
});
