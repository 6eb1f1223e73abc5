/**
 * GET /digest at a deep book never stalls matching: with 200,000 resting orders loaded
 * (MATCHD_DIGEST_TEST_ORDERS sets another count), RPC commands sent at a fixed rate are timed
 * without and then with /digest polled ten times a second. The figures are reported; the test
 * asserts only a wide margin that hashing the whole book on the event loop (about 0.3 s at this
 * size, for every poll after a change) could never keep.
 */
import { expect, test } from "bun:test";
import { LatencyHistogram } from "../../bench/histogram";
import { uniquePartition } from "../support/stack";
import {
  alternatingRpcCommands,
  conductorSuite,
  openReplies,
  PartitionStore,
  removePartition,
  startConductor,
  writeRestingBook,
} from "./helpers";

const suite = conductorSuite();
const restingOrders = Number(process.env.MATCHD_DIGEST_TEST_ORDERS ?? "200000");
const ratePerSecond = 200;
const phaseSeconds = 4;

test(`commands at ${ratePerSecond}/s are not held up by /digest polled 10/s at ${restingOrders} resting orders`, async () => {
  const partition = uniquePartition();
  const store = new PartitionStore(suite.stack.datastoreUrl, partition);
  try {
    await writeRestingBook(store, partition, restingOrders);
    const conductor = await startConductor(suite.stack, partition);
    const replies = await openReplies(suite.publisher.channelModel());
    const count = 2 * ratePerSecond * phaseSeconds;
    const rpc = alternatingRpcCommands(suite.publisher, partition, partition, count, replies.queue);
    const sentAt = new Map<string, number>();

    /** Sends commands [from, to) at the fixed rate; returns their send-to-reply p99 in ms. */
    const phase = async (from: number, to: number): Promise<{ p99: number; max: number }> => {
      const started = performance.now();
      for (let i = from; i < to; i++) {
        const due = started + ((i - from) * 1000) / ratePerSecond;
        await Bun.sleep(Math.max(0, due - performance.now()));
        sentAt.set(rpc.commands[i]!.commandId, due);
        void rpc.publish(i, i + 1);
      }
      const histogram = new LatencyHistogram();
      const deadline = performance.now() + 30_000;
      for (const command of rpc.commands.slice(from, to)) {
        while (!replies.replies.has(command.commandId) && performance.now() < deadline)
          await Bun.sleep(5);
      }
      for (const command of rpc.commands.slice(from, to)) {
        const reply = replies.replies.get(command.commandId);
        expect(reply?.status).toBe("accepted");
        histogram.record(((reply!.receivedAt as number) - sentAt.get(command.commandId)!) * 1e6);
      }
      const { p99, max } = histogram.percentilesMs();
      return { p99, max };
    };
    // Replies are stamped when they arrive.
    const originalSet = replies.replies.set.bind(replies.replies);
    replies.replies.set = (key, value) =>
      originalSet(key, { ...value, receivedAt: performance.now() });

    await phase(0, ratePerSecond); // warm-up
    const quiet = await phase(ratePerSecond, count / 2);
    let polling = true;
    const digestMs: number[] = [];
    const poller = (async () => {
      while (polling) {
        const started = performance.now();
        const answer = (await (await fetch(`${conductor.url}/digest`)).json()) as {
          restingOrders: number;
        };
        digestMs.push(performance.now() - started);
        expect(answer.restingOrders).toBeGreaterThanOrEqual(restingOrders);
        await Bun.sleep(100);
      }
    })();
    const polled = await phase(count / 2, count);
    polling = false;
    await poller;
    digestMs.sort((a, b) => a - b);
    console.log(
      `${restingOrders} resting orders, ${ratePerSecond} RPC commands/s: p99 ${quiet.p99.toFixed(2)} ms (max ${quiet.max.toFixed(2)}) without polling, ` +
        `${polled.p99.toFixed(2)} ms (max ${polled.max.toFixed(2)}) with /digest polled 10/s; ${digestMs.length} digests, ` +
        `median ${digestMs[Math.floor(digestMs.length / 2)]?.toFixed(1)} ms, slowest ${digestMs.at(-1)?.toFixed(1)} ms`,
    );
    expect(polled.p99).toBeLessThan(quiet.p99 + 50);
    await replies.close();
    expect(await conductor.stop()).toBe(0);
  } finally {
    await removePartition(store, suite.publisher, partition);
  }
}, 180_000);
