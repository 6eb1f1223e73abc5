// The digest kept level by level: its 64-bit sum wraps exactly, a bounded step hashes about
// the orders it is given, levels that come and go never pile up, and the answer is the one
// hashed afresh from the books.

import { describe, expect, test } from "bun:test";
import { DigestSum, MatchingEngine } from "../../src/domain/index";
import { cancel, place } from "./helpers";

describe("DigestSum", () => {
  test("adds and subtracts modulo 2^64", () => {
    const sum = new DigestSum();
    sum.add(0xffff_ffff, 0xffff_ffff);
    sum.add(0, 1);
    expect(sum.hex()).toBe("0000000000000000");
    sum.subtract(0, 1);
    expect(sum.hex()).toBe("ffffffffffffffff");
    sum.add(0x1234_5678, 0x9abc_def0);
    sum.subtract(0x1234_5678, 0x9abc_def0);
    expect(sum.hex()).toBe("ffffffffffffffff");
  });
});

describe("MatchingEngine digest, level by level", () => {
  test("a bounded step hashes about the orders it is given, then the digest is current", () => {
    const engine = new MatchingEngine();
    // 100 levels of 50 orders each.
    for (let level = 0; level < 100; level++) {
      for (let i = 0; i < 50; i++) {
        engine.apply(place({ id: `o-${level}-${i}`, price: String(100 + level) }));
      }
    }
    let steps = 0;
    while (!engine.digestStep(500)) steps++;
    // 500 orders a step is 10 levels a step: 100 levels take 10 steps (the last returns true).
    expect(steps).toBe(9);
    const stepped = engine.digest();
    engine.checkDigest(); // the kept digest against one hashed afresh
    const fresh = new MatchingEngine();
    for (const order of engine.restingOrders()) fresh.loadRestingOrder(order);
    expect(fresh.digest()).toBe(stepped);
  });

  test("a change after a step is in the next answer; levels that empty settle at once", () => {
    const engine = new MatchingEngine();
    engine.apply(place({ id: "a", price: "100" }));
    const one = engine.digest();
    engine.apply(place({ id: "b", price: "101" }));
    const two = engine.digest();
    expect(two).not.toBe(one);
    engine.apply(cancel("b"));
    expect(engine.digest()).toBe(one);
    engine.apply(cancel("a"));
    expect(engine.digest()).toBe("0000000000000000");
  });

  test("clear() forgets levels still waiting to be hashed", () => {
    const engine = new MatchingEngine();
    engine.apply(place({ id: "a", price: "100" }));
    engine.apply(place({ id: "b", price: "101" }));
    engine.clear();
    expect(engine.digestStep(0)).toBe(true);
    expect(engine.digest()).toBe("0000000000000000");
    engine.apply(place({ id: "c", price: "100" }));
    const fresh = new MatchingEngine();
    for (const order of engine.restingOrders()) fresh.loadRestingOrder(order);
    expect(engine.digest()).toBe(fresh.digest());
    engine.checkDigest();
  });

  test("levels that come and go while nobody asks do not pile up", () => {
    const engine = new MatchingEngine();
    for (let i = 0; i < 10_000; i++) {
      engine.apply(place({ id: `p-${i}`, price: String(100 + (i % 500)) }));
      engine.apply(cancel(`p-${i}`));
    }
    engine.apply(place({ id: "last", price: "1" }));
    // One level rests: one is left to hash, however many came and went.
    expect(engine.digestStep(0)).toBe(false);
    expect(engine.digestStep(1)).toBe(true);
    engine.checkDigest();
  });
});
