/**
 * The durability wait on a connection that a failover moves: it can never cover the writes of
 * the old connection, so it fails as soon as the connection changes, not at its deadline, on
 * a private primary + replica pair whose replica is paused so that no wait can succeed.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { connectionGeneration, createValkey } from "../../src/infra/valkey/client";
import { ConnectionChangedError, waitDurable } from "../../src/infra/valkey/durability";
import { startValkeyPair, type ValkeyPair } from "../support/valkey-pair";

let pair: ValkeyPair;

beforeAll(async () => {
  pair = await startValkeyPair("matchd-durability-wait-");
}, 60_000);
afterAll(async () => {
  process.kill(pair.replica.pid, "SIGCONT");
  await pair.replica.stop().catch(() => undefined);
  await pair.primary.stop().catch(() => undefined);
});

test("a wait whose connection was re-established fails at once with ConnectionChangedError", async () => {
  const valkey = createValkey(pair.primary.url, { name: "matchd-test-durability-wait" });
  const admin = new Redis(pair.primary.url);
  try {
    await valkey.set("matchd-test-durability-wait", "1");
    const writtenOn = connectionGeneration(valkey);
    process.kill(pair.replica.pid, "SIGSTOP");
    // Two replica fsyncs, of one replica: not even a fresh connection's wait, which has no
    // writes to cover, can succeed, so only the connection change can end it.
    const waiting = waitDurable(valkey, 30_000, { writtenOn, replicasRequired: () => 2 });
    const outcome = waiting.then(
      () => "durable",
      (error: unknown) => error,
    );
    await Bun.sleep(200);
    // What a failover does to the connection: the server drops it, the client connects again.
    await admin.client("KILL", "SKIPME", "yes", "TYPE", "normal");
    // Well inside the wait's 30 s: a wait that only checked at its end would time out instead.
    const result = await Promise.race([outcome, Bun.sleep(10_000).then(() => "still waiting")]);
    expect(result).toBeInstanceOf(ConnectionChangedError);
    expect(connectionGeneration(valkey)).toBeGreaterThan(writtenOn);
  } finally {
    process.kill(pair.replica.pid, "SIGCONT");
    valkey.disconnect();
    admin.disconnect();
  }
}, 60_000);
