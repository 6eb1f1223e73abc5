// A depth stream's side update, worked out from the change set alone: random books on 40
// prices, change sets of one to six orders added or taken (levels appearing and vanishing
// above, inside and below the top), at depths 10 and 25. After each set, what a client
// applied equals the book's whole top.

import { expect, test } from "bun:test";
import { mulberry32 } from "../../bench/workload-parts";
import { FeedBook } from "../../src/feed/feed-book";
import { type BookDepth, type SentLevels, sentLevels, sideUpdate } from "../../src/feed/messages";
import type { LevelView } from "../../src/feed/price-levels";

const depths: BookDepth[] = [10, 25];
const key = (levels: readonly LevelView[]) =>
  JSON.stringify([...levels].sort((a, b) => Number(a.price) - Number(b.price)));

test("equals the whole top's diff at every change set, whatever crosses its edge", () => {
  const random = mulberry32(7);
  const book = new FeedBook(1, 0);
  const sent = new Map<BookDepth, SentLevels>(depths.map((d) => [d, sentLevels([])]));
  const copies = new Map<BookDepth, Map<string, LevelView>>(depths.map((d) => [d, new Map()]));
  const resting: string[] = [];
  let seq = 0;
  let next = 0;
  for (let set = 0; set < 3000; set++) {
    seq++;
    for (let n = 1 + Math.floor(random() * 6); n > 0; n--) {
      const take = resting.length > 0 && random() < 0.45;
      const orderId = take
        ? resting.splice(Math.floor(random() * resting.length), 1)[0]!
        : `o${next++}`;
      if (!take) resting.push(orderId);
      const price = String(100 + Math.floor(random() * 40));
      const payload = { orderId, side: "bid", price, volume: String(1 + Math.floor(random() * 3)) };
      const type = take ? "order.cancelled.v1" : "order.rested.v1";
      book.apply({ type, pairId: 1, commandId: `c${seq}`, payload }, seq);
    }
    const changes = book.flush();
    if (changes === undefined) continue;
    for (const depth of depths) {
      const copy = copies.get(depth)!;
      for (const level of sideUpdate(book, "bid", depth, changes.levels.bid, sent.get(depth)!)) {
        if (level.volume === "0") copy.delete(level.price);
        else copy.set(level.price, level);
      }
      expect(key([...copy.values()])).toBe(key(book.side("bid").top(depth as number)));
      expect(key([...sent.get(depth)!.values()])).toBe(key([...copy.values()]));
    }
  }
});
