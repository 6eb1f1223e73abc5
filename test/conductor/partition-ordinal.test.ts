// Many partitions, one command line: conductors started alike, each in a UTS namespace of its
// own whose host name ends in its ordinal (as a StatefulSet's pods are named), each take the
// partition the ordinal names with MATCHING_PARTITION=ordinal, and serve only that one.

import { afterAll, expect, test } from "bun:test";
import { freePorts } from "../../src/stack/process";
import { eventually } from "../support/eventually";
import { matchdCommand, testStack, uniquePartition } from "../support/stack";
import { PartitionStore, Publisher, partitionCount, removePartition } from "./helpers";
import { OrderCommands } from "./order-commands";

const children: Bun.Subprocess[] = [];

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await Promise.all(children.map((child) => child.exited));
});

/** `matchd conductor --partition ordinal` under the host name `name` (unshare -u: root). */
async function startUnderHostName(name: string, brokerUrl: string, datastoreUrl: string) {
  const port = (await freePorts(1))[0]!;
  const child = Bun.spawn(
    [
      ...["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', name],
      ...matchdCommand,
      ...["conductor", "--partition", "ordinal", "--partition-count", String(partitionCount)],
      ...["--http-port", String(port), "--datastore-url", datastoreUrl, "--broker-url", brokerUrl],
    ],
    { env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, stdout: "ignore", stderr: "pipe" },
  );
  children.push(child);
  return `http://127.0.0.1:${port}`;
}

test("four conductors alike take their partitions from their host names", async () => {
  const stack = await testStack();
  const publisher = await Publisher.open(stack.brokerUrl);
  const partitions = [uniquePartition(), uniquePartition(), uniquePartition(), uniquePartition()];
  try {
    const urls = await Promise.all(
      partitions.map((p) =>
        startUnderHostName(`matchd-conductor-${p}`, stack.brokerUrl, stack.datastoreUrl),
      ),
    );
    for (const p of partitions) {
      await publisher.declare(p);
      await publisher.publish(p, [new OrderCommands(p).place("b", "bid", "100", "1")]);
    }
    // Each conductor rests the bid of its own partition's pair, and knows no other pair's.
    // -1 while the conductor is not listening yet.
    const bids = async (url: string, pairId: number) => {
      const response = await fetch(`${url}/books/${pairId}`).catch(() => undefined);
      if (response?.status !== 200) return -1;
      return ((await response.json()) as { bids: unknown[] }).bids.length;
    };
    await eventually(
      "every conductor to rest its own partition's bid",
      async () => {
        for (const [i, p] of partitions.entries())
          if ((await bids(urls[i]!, p)) !== 1) return false;
        return true;
      },
      30_000,
    );
    // Each holds its own pair's bid and no other's.
    for (const [i, p] of partitions.entries()) {
      for (const other of partitions) {
        expect(await bids(urls[i]!, other)).toBe(other === p ? 1 : 0);
      }
    }
  } finally {
    for (const child of children) child.kill("SIGKILL");
    for (const p of partitions) {
      await removePartition(new PartitionStore(stack.datastoreUrl, p), publisher, p);
    }
    await publisher.close();
  }
}, 60_000);
