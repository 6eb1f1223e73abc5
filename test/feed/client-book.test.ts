// A client's book kept from book messages: a snapshot, updates chained by prevSeq, a gap not
// applied, and a checksum that does not match counted; each answered with false.

import { expect, test } from "bun:test";
import { bookChecksum, checksumField } from "../../src/feed/checksum";
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

test("keeps each side best first as levels come, go and change", () => {
  const book = new ClientBook();
  const prices = ["10", "9.5", "100", "0.001", "55", "9.25", "10.5", "1"];
  const snapshot = (seq: number) => ({ type: "snapshot", seq, bids: [], asks: [], checksum: 0 });
  book.apply(snapshot(1));
  let seq = 1;
  const update = (side: "bids" | "asks", levels: ReturnType<typeof level>[]) =>
    book.apply({
      type: "update",
      seq: seq + 1,
      prevSeq: seq++,
      bids: [],
      asks: [],
      [side]: levels,
    });
  for (const price of prices) {
    update("bids", [level(price, "1")]);
    update("asks", [level(price, "1")]);
  }
  update("bids", [level("55", "0", 0), level("9.5", "3", 2)]);
  update("asks", [level("0.001", "0", 0), level("77", "0", 0)]);
  const numeric = (a: string, b: string) => Number(a) - Number(b);
  expect(book.side("bid").map((l) => `${l.price}:${l.volume}`)).toEqual(
    ["100", "10.5", "10", "9.5", "9.25", "1", "0.001"].map((p) => `${p}:${p === "9.5" ? 3 : 1}`),
  );
  expect(book.side("ask").map((l) => l.price)).toEqual(
    prices.filter((p) => p !== "0.001").sort(numeric),
  );
});

test("a checksum field drops the point, then the leading zeros, as Kraken's does", () => {
  const kraken = (t: string) => t.replace(".", "").replace(/^0+/, "");
  for (const text of ["0.0500", "0", "0.0", "100", "1.000", "0.00000001", "12345.6789", "007"]) {
    expect(checksumField(text)).toBe(kraken(text));
  }
});
