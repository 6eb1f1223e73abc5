/**
 * A primary the Sentinels name by a hostname, not by the address the socket reaches
 * (`resolve-hostnames` and `announce-hostnames`, as behind NAT or in containers): the policy
 * watch finds it in their views by its run id, so durability waits succeed and commands are
 * acknowledged, instead of every wait being refused for a name that never matches.
 */
import { afterAll, expect, test } from "bun:test";
import { freePorts } from "../../src/stack/process";
import { type RunningValkey, startSentinel, withClient } from "../../src/stack/valkey";
import {
  alternatingRpcCommands,
  conductorSuite,
  eventually,
  openReplies,
  startConductor,
} from "../conductor/helpers";
import { uniquePartition } from "../support/stack";
import { tempDir } from "../support/temp-dir";
import { startValkeyPair } from "../support/valkey-pair";

const suite = conductorSuite();
const servers: RunningValkey[] = [];

afterAll(async () => {
  for (const server of servers) await server.stop().catch(() => undefined);
});

test("a primary the Sentinel names by hostname acknowledges: matched by its run id", async () => {
  const pair = await startValkeyPair("matchd-announced-");
  servers.push(pair.primary, pair.replica);
  const port = (await freePorts(1))[0]!;
  const sentinel = await startSentinel({
    dir: tempDir("matchd-announced-sentinel-"),
    port,
    sentinelLines: [
      "sentinel resolve-hostnames yes",
      "sentinel announce-hostnames yes",
      `sentinel monitor named localhost ${pair.primary.port} 1`,
      "sentinel down-after-milliseconds named 5000",
    ],
  });
  servers.push(sentinel);
  const sentinelUrl = `redis+sentinel://127.0.0.1:${port}/named`;
  // The boot check needs the Sentinel to know a replica (from the primary's INFO).
  await eventually("the Sentinel names localhost and knows the replica", async () => {
    const master = await withClient(sentinel.url, (c) => c.call("SENTINEL", "MASTER", "named"));
    const fields = master as string[];
    const value = (name: string) => fields[fields.indexOf(name) + 1];
    return value("ip") === "localhost" && value("num-slaves") === "1";
  });

  const partition = uniquePartition();
  const { queue, replies, close } = await openReplies(suite.publisher.channelModel());
  try {
    const { publish } = alternatingRpcCommands(suite.publisher, partition, 61, 10, queue);
    // Ready means the watch counted with the Sentinel's view and found no violation.
    const conductor = await startConductor(suite.stack, partition, { datastoreUrl: sentinelUrl });
    const ready = (await (await fetch(`${conductor.url}/readyz`)).json()) as {
      reasons: string[];
    };
    expect(ready.reasons.join(";")).not.toContain("a Sentinel names");
    await publish(0, 10);
    await eventually("every command replied", () => replies.size === 10, 30_000);
    expect(await conductor.stop()).toBe(0);
  } finally {
    await close();
  }
}, 90_000);
