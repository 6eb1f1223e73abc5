// Canonical decimal text of a non-negative safe scaled integer, computed with integer arithmetic
// and remembered in a small direct-mapped cache: fills format volumes, remainders and quotes on
// every command, and many of them repeat.

const pow10: number[] = [];
for (let i = 0; i <= 22; i++) pow10.push(10 ** i);

/** "", "0", "00", ... for padding a fraction to its width without building strings per call. */
const zeros: string[] = pow10.map((_, n) => "0".repeat(n));

const CACHE_BITS = 13;
const cachedValues = new Float64Array(1 << CACHE_BITS).fill(-1);
const cachedDecimals = new Int8Array(1 << CACHE_BITS);
const cachedTexts: string[] = new Array<string>(1 << CACHE_BITS).fill("");

/**
 * Text of `value` / 10^decimals with no exponent, no trailing fraction zeros and no point when
 * whole. `value` must be a safe integer >= 0 and `decimals` between 0 and 22 (10^decimals is then
 * a double exactly).
 */
export function formatSafeScaled(value: number, decimals: number): string {
  // Low 32 bits of the value (ToInt32 is exact modulo 2^32) mixed with the scale pick the slot;
  // the full key is compared, so colliding values only miss.
  const slot = Math.imul((value | 0) ^ (decimals << 24), 0x9e3779b1) >>> (32 - CACHE_BITS);
  if (cachedValues[slot] === value && cachedDecimals[slot] === decimals) return cachedTexts[slot]!;
  const text = decimals === 0 ? String(value) : formatFraction(value, decimals);
  cachedValues[slot] = value;
  cachedDecimals[slot] = decimals;
  cachedTexts[slot] = text;
  return text;
}

function formatFraction(value: number, decimals: number): string {
  const scale = pow10[decimals]!;
  // The remainder of two safe integers is exact, and so is dividing the multiple left by scale.
  let fraction = value % scale;
  const whole = (value - fraction) / scale;
  if (fraction === 0) return String(whole);
  let width = decimals;
  if (fraction <= 0x7fffffff) {
    // Below 2^31 the digits are stripped with 32-bit integer division, much cheaper than % on
    // doubles; the result is the same integer.
    let small = fraction | 0;
    while (small % 10 === 0) {
      small = (small / 10) | 0;
      width--;
    }
    fraction = small;
  } else {
    while (fraction % 10 === 0) {
      fraction /= 10;
      width--;
    }
  }
  const digits = String(fraction);
  return `${whole}.${zeros[width - digits.length]}${digits}`;
}
