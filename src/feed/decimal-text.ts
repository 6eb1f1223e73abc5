/**
 * Exact sums and comparisons of the canonical decimal strings events carry (no exponent, no
 * trailing fraction zeros), as integers scaled by 10^18: the most decimals a pair may have.
 */

const scaleDigits = 18;
const scale = 10n ** BigInt(scaleDigits);

/** `text` × 10^18 as a bigint; `text` is a plain non-negative decimal ("100", "0.25"). */
export function parseDecimal(text: string): bigint {
  const point = text.indexOf(".");
  if (point < 0) return BigInt(text) * scale;
  const whole = text.slice(0, point);
  const fraction = text
    .slice(point + 1)
    .padEnd(scaleDigits, "0")
    .slice(0, scaleDigits);
  return BigInt(whole === "" ? "0" : whole) * scale + BigInt(fraction);
}

/** The canonical text of a value scaled by 10^18: no trailing fraction zeros, no lone point. */
export function formatDecimal(value: bigint): string {
  const negative = value < 0n;
  const magnitude = negative ? -value : value;
  const whole = magnitude / scale;
  const fraction = (magnitude % scale).toString().padStart(scaleDigits, "0").replace(/0+$/, "");
  const text = fraction === "" ? whole.toString() : `${whole}.${fraction}`;
  return negative ? `-${text}` : text;
}

/** The canonical text of a decimal string ("100.50" -> "100.5"), so equal prices are equal keys. */
export function canonicalDecimal(text: string): string {
  return formatDecimal(parseDecimal(text));
}
