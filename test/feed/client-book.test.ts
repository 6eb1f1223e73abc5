// A client's book kept from book messages: a snapshot, updates chained by prevSeq, a gap not
// applied, and a checksum that does not match counted; each answered with false.

import { expect, test } from "bun:test";
import { bookChecksum } from "../../src/feed/checksum";
import { ClientBook } from "../../src/feed/client-book";

const level = (price: string, volume: string, orders = 1) => ({ price, volume, orders });

test("applies a snapshot and chained updates; refuses a gap and a wrong checksum", () => {
  const book = new ClientBook();
  const bids = [level("100", "1"), level("99.5", "2")];
  const snapshot = { type: "snapshot", seq: 2, bids, asks: [], checksum: bookChecksum(bids, []) };
  expect(book.apply(snapshot)).toBe(true);
  const after = [level("99.5", "2")];
  const update = {
    type: "update",
    seq: 4,
    prevSeq: 2,
    bids: [level("100", "0", 0)],
    asks: [],
    checksum: bookChecksum(after, []),
  };
  expect(book.apply(update)).toBe(true);
  expect(book.side("bid")).toEqual(after);
  // prevSeq 5 does not follow seq 4: not applied.
  expect(book.apply({ ...update, seq: 7, prevSeq: 5, bids: [level("98", "1")] })).toBe(false);
  expect(book.side("bid")).toEqual(after);
  expect(book.apply({ ...update, seq: 8, prevSeq: 4, bids: [], checksum: 1 })).toBe(false);
  expect({ snapshots: book.snapshots, updates: book.updates, gaps: book.chainBreaks }).toEqual({
    snapshots: 1,
    updates: 2,
    gaps: 1,
  });
  expect(book.checksumFailures).toBe(1);
  expect(book.seq).toBe(8);
});
