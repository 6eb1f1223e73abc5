// When a partition's change sets are handed on: at once after an event the outbox marked as
// its commit's last, else at the next command's first event or a millisecond later.

import { expect, test } from "bun:test";
import type { ChangeSet, FeedEvent } from "../../src/feed/feed-book";
import { flushDelayMs, PartitionFeed } from "../../src/feed/partition-feed";

function feedWithSets() {
  const sets: ChangeSet[] = [];
  const feed = new PartitionFeed({ partition: 0, partitionCount: 1, publish: (s) => sets.push(s) });
  feed.load({ seq: 0, pairs: [], halted: new Map() });
  return { feed, sets };
}

const rested = (commandId: string, orderId: string, commandLast?: boolean): FeedEvent => ({
  type: "order.rested.v1",
  pairId: 1,
  commandId,
  payload: { orderId, side: "bid", price: "10", volume: "1" },
  ...(commandLast === undefined ? {} : { commandLast }),
});

test("a commit's marked last event hands its change set on at once", () => {
  const { feed, sets } = feedWithSets();
  feed.receive(rested("c1", "o1"), "1");
  expect(sets).toHaveLength(0);
  feed.receive(rested("c1", "o2", true), "2");
  expect(sets.map((s) => s.seq)).toEqual([2]);
});

test("without the mark, the set waits for the next command or the delay", async () => {
  const { feed, sets } = feedWithSets();
  feed.receive(rested("c1", "o1", false), "1");
  feed.receive(rested("c2", "o2"), "2");
  expect(sets.map((s) => s.seq)).toEqual([1]);
  await Bun.sleep(flushDelayMs + 20);
  expect(sets.map((s) => s.seq)).toEqual([1, 2]);
});

test("a marked event held behind a gap hands on nothing until the gap fills", () => {
  const { feed, sets } = feedWithSets();
  feed.receive(rested("c2", "o2", true), "2");
  expect(sets).toHaveLength(0);
  feed.receive(rested("c1", "o1", true), "1");
  expect(sets.map((s) => s.seq)).toEqual([1, 2]);
});
