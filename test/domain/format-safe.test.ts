// The cached integer formatter against plain bigint string handling, over random safe values,
// every scale, and values that collide in the cache.

import { expect, test } from "bun:test";
import { formatSafeScaled } from "../../src/domain/format-safe";

/** The obvious canonical text: pad, insert the point, strip trailing fraction zeros. */
function reference(value: bigint, decimals: number): string {
  const digits = value.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return fraction === "" ? whole : `${whole}.${fraction}`;
}

test("matches the reference for random safe values at every scale", () => {
  let state = 12345;
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state;
  };
  const kinds = [0, 0, 0, 0];
  for (let i = 0; i < 200_000; i++) {
    const decimals = i % 23;
    // Mix magnitudes: small, around 2^32 (cache keys use the low 32 bits), and near 2^53.
    // The kind comes from the generator's top bits: its low bits only count up in a cycle
    // (`% 4` never chose the values near 2^53).
    const kind = next() >>> 30;
    kinds[kind]!++;
    let value: number;
    if (kind === 0) value = next() % 100_000;
    else if (kind === 1) value = next() * 2 ** 21 + (next() % 2 ** 21);
    else if (kind === 2) value = (next() % 1000) * 10 ** (next() % 10);
    else value = Number.MAX_SAFE_INTEGER - (next() % 1000);
    expect(formatSafeScaled(value, decimals)).toBe(reference(BigInt(value), decimals));
    // A second call takes the cached path and must agree.
    expect(formatSafeScaled(value, decimals)).toBe(reference(BigInt(value), decimals));
  }
  for (const count of kinds) expect(count).toBeGreaterThan(40_000);
});

test("values equal modulo 2^32 and different scales do not share cache entries", () => {
  const a = 5;
  const b = 5 + 2 ** 32;
  expect(formatSafeScaled(a, 2)).toBe("0.05");
  expect(formatSafeScaled(b, 2)).toBe("42949673.01");
  expect(formatSafeScaled(a, 0)).toBe("5");
  expect(formatSafeScaled(a, 2)).toBe("0.05");
  expect(formatSafeScaled(Number.MAX_SAFE_INTEGER, 22)).toBe("0.0000009007199254740991");
});
