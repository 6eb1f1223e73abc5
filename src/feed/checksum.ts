/**
 * The book checksum of Kraken's WebSocket v2 `book` channel: CRC32 (IEEE) of the top 10 asks
 * (price ascending) then the top 10 bids (price descending), each level written as its price
 * then its volume, exactly as sent, with the decimal point and leading zeros removed. The
 * result is the unsigned 32-bit value. Client code written for Kraken's book verifies ours.
 */

import type { LevelView } from "./price-levels";

/** Levels per side the checksum covers, whatever the subscription's depth. */
export const checksumLevels = 10;

const table = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  table[n] = c >>> 0;
}

/** CRC32 (IEEE 802.3, the zlib one) of an ASCII string, unsigned. */
export function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i++) {
    crc = table[(crc ^ text.charCodeAt(i)) & 0xff]! ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
}

/** "0.0500" -> "500": the point removed, then the leading zeros. */
export function checksumField(text: string): string {
  const point = text.indexOf(".");
  const digits = point < 0 ? text : text.slice(0, point) + text.slice(point + 1);
  let zeros = 0;
  while (zeros < digits.length && digits.charCodeAt(zeros) === 48) zeros++;
  return digits.slice(zeros);
}

/** The checksum of a book given its sides best first (at least their top 10 levels). */
export function bookChecksum(bids: readonly LevelView[], asks: readonly LevelView[]): number {
  return crc32(topFields(asks) + topFields(bids));
}

/** The checksum's text of a side's top 10 levels: price then volume, each as a field. */
function topFields(levels: readonly LevelView[]): string {
  let text = "";
  for (let i = 0; i < levels.length && i < checksumLevels; i++) {
    text += checksumField(levels[i]!.price) + checksumField(levels[i]!.volume);
  }
  return text;
}
