// Exact money arithmetic on scaled bigints: parse contract decimal strings, format them back in
// canonical form. Floating point never touches a price or a volume.

/** Largest number of decimals a pair may declare; 10^18 keeps every scale inside one bigint table. */
export const MAX_DECIMALS = 18;
/**
 * At most 15 integer digits (values below 10^15). Real prices and volumes are far below this;
 * the bound keeps products such as price × volume × 10^decimals small and rejects absurd input.
 */
export const MAX_INTEGER_DIGITS = 15;
/** Longer strings are refused before any digit is looked at. */
const MAX_STRING_LENGTH = 64;

const pow10: bigint[] = [];
for (let i = 0, value = 1n; i <= 3 * MAX_DECIMALS + MAX_INTEGER_DIGITS; i++, value *= 10n) {
  pow10.push(value);
}

const pow10Number: number[] = [];
for (let i = 0; i <= 2 * MAX_DECIMALS; i++) pow10Number.push(10 ** i);

/** 10^n as a bigint from a precomputed table (n between 0 and 69). */
export function pow10n(n: number): bigint {
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
      // One bigint conversion instead of a bigint multiply whenever the product stays exact.
      if (scaled <= Number.MAX_SAFE_INTEGER) return BigInt(scaled);
      return BigInt(small) * pow10n(decimals - fractionDigits);
    }
    return BigInt(small) / pow10n(fractionDigits - decimals);
  }
  const plain = dot < 0 ? text : text.slice(0, dot) + text.slice(dot + 1);
  const raw = BigInt(plain);
  if (fractionDigits <= decimals) return raw * pow10n(decimals - fractionDigits);
  return raw / pow10n(fractionDigits - decimals);
}

function classifyBadCharacter(text: string, c: number): DecimalError {
  if (c === 101 || c === 69)
    return { problem: "exponent", reason: "exponent notation not accepted" };
  if (c === 45 && text.length > 1) return { problem: "negative", reason: "negative value" };
  return { problem: "bad-decimal", reason: "not a plain decimal number" };
}

/** Per-scale caches keyed by the value as a double (exact below 2^53), which hashes faster than a bigint. */
const formatCaches: Map<number, string>[] = [];
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Canonical decimal text of a scaled integer: no exponent, no trailing fraction zeros, no point
 * when the value is whole. Small values are cached per scale because the hot path formats the
 * same volumes and prices over and over.
 */
export function formatScaled(value: bigint, decimals: number): string {
  if (value > SAFE || value < 0n) return formatUncached(value, decimals);
  let cache = formatCaches[decimals];
  if (cache === undefined) {
    cache = new Map();
    formatCaches[decimals] = cache;
  }
  const key = Number(value);
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const text = formatUncached(value, decimals);
  // A bounded cache: clearing it wholesale keeps memory flat without LRU bookkeeping.
  if (cache.size >= 4096) cache.clear();
  cache.set(key, text);
  return text;
}

/**
 * True when an already-validated decimal string is in canonical form, so the hot path can reuse
 * the caller's text instead of formatting the parsed value again.
 */
export function isCanonicalDecimal(text: string): boolean {
  const length = text.length;
  if (length > 1 && text.charCodeAt(0) === 48 && text.charCodeAt(1) !== 46) return false;
  if (text.indexOf(".") < 0) return true;
  return text.charCodeAt(length - 1) !== 48;
}

function formatUncached(value: bigint, decimals: number): string {
  const negative = value < 0n;
  const digits = (negative ? -value : value).toString();
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
