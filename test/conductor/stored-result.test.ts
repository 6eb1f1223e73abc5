/**
 * The stored form of a command's result: every result the engine produces reads back as it
 * was, it is smaller than the JSON object, and a JSON object stored earlier still reads.
 */
import { describe, expect, test } from "bun:test";
import { createWorkload, DOMAIN_CLOCK } from "../../bench/workloads";
import {
  decodeStoredResult,
  encodeStoredResult,
  storedResultJson,
} from "../../src/conductor/stored-result";
import { MatchingEngine } from "../../src/domain/index";
import type { CommandResult } from "../../src/domain/types";

/**
 * Results of every kind: the clocked exchange mix places, cancels, amends, stops, rejects,
 * gtd orders, icebergs, one-cancels-other lists and switches (its ticks are never stored).
 */
function engineResults(count: number): CommandResult[] {
  const engine = new MatchingEngine();
  const workload = createWorkload("exchange", { seed: 7, pairs: 2, clock: DOMAIN_CLOCK });
  const results = workload.prefill().map((command) => engine.apply(command).result);
  for (let i = 0; i < count; i++) {
    if (i % 100 === 0 && workload.tick !== undefined) engine.apply(workload.tick(i));
    results.push(engine.apply(workload.next(i)).result);
  }
  // A command applied twice: the duplicate result.
  const again = workload.prefill()[0];
  if (again !== undefined) results.push(engine.apply(again).result);
  return results;
}

describe("stored result", () => {
  test("every result of the exchange mix reads back equal, in at most half the bytes", () => {
    const results = engineResults(5_000);
    const codes = new Set(results.map((r) => r.code));
    expect(codes.size).toBeGreaterThan(5);
    expect(results.some((r) => r.legs !== undefined)).toBe(true);
    expect(results.some((r) => r.triggerAt !== undefined)).toBe(true);
    let jsonBytes = 0;
    let storedBytes = 0;
    for (const [i, result] of results.entries()) {
      // As a conductor stores them: with the batch's time, on all but a few (written earlier).
      if (i % 10 !== 0) result.transactTime = DOMAIN_CLOCK.epochMs + i;
      const stored = encodeStoredResult(result);
      expect(decodeStoredResult(result.commandId, stored)).toEqual(result);
      jsonBytes += JSON.stringify(result).length;
      storedBytes += stored.length;
    }
    expect(storedBytes).toBeLessThan(jsonBytes / 2);
  });

  test("a name or a field the table does not predict is kept", () => {
    const odd: CommandResult = {
      commandId: "c-1",
      status: "rejected",
      code: 999,
      codeName: "from-a-later-version",
      reason: 'a reason with "quotes", | and ]',
      events: 0,
      cancelledOrders: 3,
    };
    expect(decodeStoredResult("c-1", encodeStoredResult(odd))).toEqual(odd);
  });

  test("an array written before results carried the time reads in its own layout", () => {
    const rejected = '[301,1,"o-1","rejected",null,null,1,"no such order"]';
    expect(decodeStoredResult("c-3", rejected)).toEqual({
      commandId: "c-3",
      status: "rejected",
      code: 301,
      codeName: "unknown-order",
      orderId: "o-1",
      orderStatus: "rejected",
      events: 1,
      reason: "no such order",
    });
    const allNull = '[100,0,"o-2","rested",null,"1",1,null,null,null,null,1800000000000]';
    expect(decodeStoredResult("c-4", allNull)).toMatchObject({ triggerAt: 1_800_000_000_000 });
    expect(decodeStoredResult("c-4", allNull).transactTime).toBeUndefined();
  });

  test("the time goes eighth and comes back", () => {
    const result: CommandResult = {
      commandId: "c-5",
      status: "rejected",
      code: 301,
      codeName: "unknown-order",
      reason: "no such order",
      events: 1,
      transactTime: 1_800_000_000_123,
    };
    const stored = encodeStoredResult(result);
    expect(stored).toBe('[301,1,null,null,null,null,1,1800000000123,"no such order"]');
    expect(decodeStoredResult("c-5", stored)).toEqual(result);
  });

  test("a result stored as a JSON object reads as it was written", () => {
    const legacy =
      '{"commandId":"c-2","status":"accepted","code":100,"codeName":"rested","events":1}';
    expect(storedResultJson("c-2", legacy)).toBe(legacy);
    expect(decodeStoredResult("c-2", legacy).codeName).toBe("rested");
  });
});
