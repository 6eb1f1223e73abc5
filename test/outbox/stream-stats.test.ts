/**
 * The outbox's stream gauges: a missing group is 0 pending, but a datastore that answers with
 * errors (a command timeout, a lost connection) leaves them unknown, never zeros that would
 * read as a drained stream. A stub pipeline injects the failed replies.
 */
import { expect, test } from "bun:test";
import type Redis from "ioredis";
import { outboxConsumerGroup, partitionKeys } from "../../src/infra/valkey/keys";
import { OutboxStream } from "../../src/outbox/stream-reader";

/** A connection whose pipeline resolves with the given [error, value] replies. */
function answering(replies: [Error | null, unknown][]): Redis {
  const pipeline = {
    xlen: () => pipeline,
    call: () => pipeline,
    xrange: () => pipeline,
    exec: async () => replies,
  };
  return { pipeline: () => pipeline } as unknown as Redis;
}

const unused = {} as Redis;
const stream = new OutboxStream(unused, unused, partitionKeys(7), outboxConsumerGroup, "stats");

test("failed replies leave the gauges unknown", async () => {
  const timeout = new Error("Command timed out");
  expect(
    await stream.stats(
      answering([
        [timeout, null],
        [timeout, null],
        [timeout, null],
      ]),
    ),
  ).toBe(null);
  expect(
    await stream.stats(
      answering([
        [null, 5],
        [timeout, null],
        [null, []],
      ]),
    ),
  ).toBe(null);
});

test("a missing group is nothing pending; the length and the oldest entry still count", async () => {
  const noGroup = new Error("NOGROUP No such key or consumer group");
  const stats = await stream.stats(
    answering([
      [null, 5],
      [noGroup, null],
      [null, [["1700000000000-0", ["event", "{}"]]]],
    ]),
  );
  expect(stats).toEqual({ pending: 0, length: 5, oldestEntryMs: 1_700_000_000_000 });
});
