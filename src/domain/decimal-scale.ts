// Exact money arithmetic on scaled integers: parse contract decimal strings, format them back in
// canonical form. A scaled value is a number while it is a safe integer and a bigint beyond that,
// so the common case runs on plain integer arithmetic and large values stay exact.

import { formatSafeScaled } from "./format-safe";

/** Largest number of decimals a pair may declare; 10^18 keeps every scale inside one bigint table. */
export const MAX_DECIMALS = 18;
/**
 * At most 15 integer digits (values below 10^15). Real prices and volumes are far below this;
 * the bound keeps products such as price × volume × 10^decimals small and rejects absurd input.
 */
export const MAX_INTEGER_DIGITS = 15;
/** Longer strings are refused before any digit is looked at. */
const MAX_STRING_LENGTH = 64;

const SAFE = Number.MAX_SAFE_INTEGER;
const SAFE_BIG = BigInt(SAFE);

const pow10: bigint[] = [];
for (let i = 0, value = 1n; i <= 3 * MAX_DECIMALS + MAX_INTEGER_DIGITS; i++, value *= 10n) {
  pow10.push(value);
}

const pow10Number: number[] = [];
for (let i = 0; i <= 2 * MAX_DECIMALS; i++) pow10Number.push(10 ** i);

/** 10^n as a bigint from a precomputed table (n between 0 and 69). */
function pow10n(n: number): bigint {
  const value = pow10[n];
  if (value === undefined) throw new RangeError(`pow10n(${n}) outside table`);
  return value;
}

export type DecimalProblem = "bad-decimal" | "exponent" | "negative" | "precision" | "magnitude";

/** A parse failure, kept apart from a value by `typeof result === "object"`. */
export interface DecimalError {
  problem: DecimalProblem;
  reason: string;
}

/**
 * Parses a non-negative decimal string ("100", "0.0001") into an integer scaled by 10^decimals.
 * Accepted: digits with an optional fraction; trailing fraction zeros beyond `decimals` are allowed
 * because they do not change the value. Refused: signs, exponents, whitespace, empty parts.
 */
export function parseScaled(text: unknown, decimals: number): bigint | DecimalError {
  const value = parseScaledValue(text, decimals);
  return typeof value === "number" ? BigInt(value) : value;
}

/** parseScaled for the engine: the same checks and value, as a canonical `Scaled`. */
export function parseScaledValue(text: unknown, decimals: number): Scaled | DecimalError {
  if (typeof text !== "string") return { problem: "bad-decimal", reason: "not a string" };
  const length = text.length;
  if (length === 0) return { problem: "bad-decimal", reason: "empty" };
  if (length > MAX_STRING_LENGTH) return { problem: "magnitude", reason: "too many characters" };
  let dot = -1;
  let digits = 0;
  let small = 0;
  let lastNonZeroFraction = -1;
  let firstNonZero = -1;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      digits++;
      if (firstNonZero < 0 && c !== 48 && dot < 0) firstNonZero = i;
      if (dot >= 0 && c !== 48) lastNonZeroFraction = i;
      // Exact while at most 15 significant digits have been seen; the slow path covers the rest.
      if (digits <= 15) small = small * 10 + (c - 48);
    } else if (c === 46 && dot < 0) {
      if (i === 0 || i === length - 1) return { problem: "bad-decimal", reason: "misplaced point" };
      dot = i;
    } else {
      return classifyBadCharacter(text, c);
    }
  }
  const integerDigits = dot < 0 ? length : dot;
  if (firstNonZero >= 0 && integerDigits - firstNonZero > MAX_INTEGER_DIGITS) {
    return { problem: "magnitude", reason: `more than ${MAX_INTEGER_DIGITS} integer digits` };
  }
  const fractionDigits = dot < 0 ? 0 : length - dot - 1;
  const significantFraction = lastNonZeroFraction < 0 ? 0 : lastNonZeroFraction - dot;
  if (significantFraction > decimals) {
    return { problem: "precision", reason: `more than ${decimals} decimals` };
  }
  if (digits <= 15) {
    // small is the digits without the point, i.e. value × 10^fractionDigits.
    if (fractionDigits <= decimals) {
      const scaled = small * pow10Number[decimals - fractionDigits]!;
      // A product at most MAX_SAFE_INTEGER is exact (rounding is monotonic, 2^53 is a double).
      if (scaled <= SAFE) return scaled;
      return narrow(BigInt(small) * pow10n(decimals - fractionDigits));
    }
    // The dropped fraction digits are zeros (checked above), so the quotient is an exact integer.
    return small / pow10Number[fractionDigits - decimals]!;
  }
  const plain = dot < 0 ? text : text.slice(0, dot) + text.slice(dot + 1);
  const raw = BigInt(plain);
  if (fractionDigits <= decimals) return narrow(raw * pow10n(decimals - fractionDigits));
  return narrow(raw / pow10n(fractionDigits - decimals));
}

const NEGATIVE_PLAIN_DECIMAL = /^-[0-9]+(\.[0-9]+)?$/;

function classifyBadCharacter(text: string, c: number): DecimalError {
  if (c === 101 || c === 69)
    return { problem: "exponent", reason: "exponent notation not accepted" };
  // Negative only when a sign leads a plain decimal: "1-2", "-abc" and "--1" are not numbers.
  if (c === 45 && NEGATIVE_PLAIN_DECIMAL.test(text))
    return { problem: "negative", reason: "negative value" };
  return { problem: "bad-decimal", reason: "not a plain decimal number" };
}

/**
 * Canonical decimal text of a scaled integer: no exponent, no trailing fraction zeros, no point
 * when the value is whole.
 */
export function formatScaled(value: bigint, decimals: number): string {
  return formatValue(narrow(value), decimals);
}

/** formatScaled for a canonical `Scaled`; safe values take the cached integer path. */
export function formatValue(value: Scaled, decimals: number): string {
  if (typeof value !== "number" || value < 0 || !(decimals >= 0 && decimals <= 22)) {
    return formatDigits(value.toString(), decimals);
  }
  // Zero is the most common value (nothing executed, nothing left) and needs no lookup.
  if (value === 0) return "0";
  return formatSafeScaled(value, decimals);
}

/**
 * True when an already-validated decimal string is in canonical form, so the hot path can reuse
 * the caller's text instead of formatting the parsed value again.
 */
export function isCanonicalDecimal(text: string): boolean {
  const length = text.length;
  if (length > 1 && text.charCodeAt(0) === 48 && text.charCodeAt(1) !== 46) return false;
  // A loop over char codes: String.prototype.indexOf leaves the JIT and cost more than the parse.
  for (let i = 0; i < length; i++) {
    if (text.charCodeAt(i) === 46) return text.charCodeAt(length - 1) !== 48;
  }
  return true;
}

/** Formats the decimal digits of a scaled integer (with an optional leading minus sign). */
function formatDigits(signed: string, decimals: number): string {
  const negative = signed.charCodeAt(0) === 45;
  const digits = negative ? signed.slice(1) : signed;
  let text: string;
  if (decimals === 0) {
    text = digits;
  } else {
    const padded =
      digits.length <= decimals ? "0".repeat(decimals - digits.length + 1) + digits : digits;
    const cut = padded.length - decimals;
    let end = padded.length;
    while (end > cut && padded.charCodeAt(end - 1) === 48) end--;
    text = end === cut ? padded.slice(0, cut) : `${padded.slice(0, cut)}.${padded.slice(cut, end)}`;
  }
  return negative ? `-${text}` : text;
}

/**
 * A scaled integer in canonical form: a number when it is a safe integer, else a bigint. Every
 * engine value is kept canonical, so `===` compares values; `<` and friends are exact across the
 * two types. Arithmetic goes through the helpers below, which stay on numbers while the exact
 * result is safe and fall back to bigints otherwise.
 */
export type Scaled = number | bigint;

/** The canonical form of an integer value. */
function narrow(value: bigint): Scaled {
  return value <= SAFE_BIG && value >= -SAFE_BIG ? Number(value) : value;
}

// For safe integer operands, a double result within ±MAX_SAFE_INTEGER is the exact result: the
// exact result is an integer, rounding is monotonic and ±2^53 are doubles, so an exact result
// beyond the safe range can never round back into it.

export function addScaled(a: Scaled, b: Scaled): Scaled {
  if (typeof a === "number" && typeof b === "number") {
    const sum = a + b;
    if (sum <= SAFE && sum >= -SAFE) return sum;
  }
  return narrow(BigInt(a) + BigInt(b));
}

export function subScaled(a: Scaled, b: Scaled): Scaled {
  if (typeof a === "number" && typeof b === "number") {
    const difference = a - b;
    if (difference <= SAFE && difference >= -SAFE) return difference;
  }
  return narrow(BigInt(a) - BigInt(b));
}

export function mulScaled(a: Scaled, b: Scaled): Scaled {
  if (typeof a === "number" && typeof b === "number") {
    const product = a * b;
    if (product <= SAFE && product >= -SAFE) return product;
  }
  return narrow(BigInt(a) * BigInt(b));
}

/** floor(a / b) for a >= 0 and b > 0, like bigint division. */
export function divScaled(a: Scaled, b: Scaled): Scaled {
  if (typeof a === "number" && typeof b === "number") {
    // The remainder of two safe integers is exact, and so is dividing a multiple of b by b.
    const remainder = a % b;
    return (a - remainder) / b;
  }
  return narrow(BigInt(a) / BigInt(b));
}

const pow10Scaled: Scaled[] = pow10.map(narrow);

/** 10^n as a canonical `Scaled` (n between 0 and 69). */
export function pow10Value(n: number): Scaled {
  const value = pow10Scaled[n];
  if (value === undefined) throw new RangeError(`pow10Value(${n}) outside table`);
  return value;
}
