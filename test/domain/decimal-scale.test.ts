// Table tests for the decimal parser/formatter and the digest hash that everything else builds on.

import { describe, expect, test } from "bun:test";
import { Fnv1a64, formatScaled, parseScaled } from "../../src/domain/index";

describe("parseScaled", () => {
  test.each([
    ["100", 2, 10000n],
    ["0.0001", 8, 10000n],
    ["1.50", 1, 15n],
    ["007", 0, 7n],
    ["0", 3, 0n],
    ["123456789012345.123456789012345678", 18, 123456789012345123456789012345678n],
  ])("%p at %p decimals is %p", (text, decimals, expected) => {
    expect(parseScaled(text, decimals)).toBe(expected);
  });

  test.each([
    ["abc", "bad-decimal"],
    ["1e5", "exponent"],
    ["1E5", "exponent"],
    ["-1", "negative"],
    ["-0.5", "negative"],
    ["-abc", "bad-decimal"],
    ["--1", "bad-decimal"],
    ["-", "bad-decimal"],
    ["1-2", "bad-decimal"],
    ["", "bad-decimal"],
    ["1.", "bad-decimal"],
    [".5", "bad-decimal"],
    [" 1", "bad-decimal"],
    ["1,5", "bad-decimal"],
    ["+1", "bad-decimal"],
    ["NaN", "bad-decimal"],
    ["1.001", "precision"],
    ["1000000000000000", "magnitude"],
    ["9".repeat(70), "magnitude"],
  ])("%p is refused as %p", (text, problem) => {
    const result = parseScaled(text, 2);
    expect(typeof result === "object" ? result.problem : String(result)).toBe(problem);
  });

  test("a number is not a decimal string", () => {
    expect(parseScaled(1, 2)).toEqual({ problem: "bad-decimal", reason: "not a string" });
  });
});

describe("formatScaled", () => {
  test.each([
    [10000n, 2, "100"],
    [15n, 1, "1.5"],
    [1n, 8, "0.00000001"],
    [0n, 8, "0"],
    [1050n, 3, "1.05"],
    [2n ** 70n, 0, (2n ** 70n).toString()],
  ])("%p at %p decimals is %p", (value, decimals, expected) => {
    expect(formatScaled(value, decimals)).toBe(expected);
  });
});

describe("Fnv1a64", () => {
  test.each([
    ["", "cbf29ce484222325"],
    ["a", "af63dc4c8601ec8c"],
    ["foobar", "85944171f73967e8"],
  ])("FNV-1a 64 of %p is %p", (input, expected) => {
    const hash = new Fnv1a64();
    for (const c of input) hash.byte(c.charCodeAt(0));
    expect(hash.hex()).toBe(expected);
  });
});
