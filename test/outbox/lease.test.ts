/**
 * The lease keeper against a datastore that stops answering (a frozen connection: renewals
 * neither succeed nor fail): the holder must stop trusting its lease while the key still
 * names it, so nobody else can hold the lease while it might still publish.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect, createServer, type Socket } from "node:net";
import Redis from "ioredis";
import { createLogger } from "../../src/infra/log";
import { partitionKeys } from "../../src/infra/valkey/keys";
import { PartitionLease } from "../../src/outbox/lease";
import { stackStartTimeoutMs, type TestStack, testStack, uniquePartition } from "../support/stack";
import { eventually } from "./helpers";

let stack: TestStack;
beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);

/** A proxy whose connections can be frozen: bytes are held, not forwarded, until thawed. */
async function freezingProxy(serverUrl: string) {
  const target = new URL(serverUrl);
  let frozen = false;
  const held: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const forward = (from: Socket, to: Socket) =>
    from.on("data", (chunk) => {
      if (frozen) held.push(() => to.write(chunk));
      else to.write(chunk);
    });
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => undefined);
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const url = new URL(serverUrl);
  url.hostname = "127.0.0.1";
  url.port = String(typeof address === "object" && address ? address.port : 0);
  return {
    url: url.toString(),
    freeze: () => {
      frozen = true;
    },
    thaw: () => {
      frozen = false;
      for (const send of held.splice(0)) send();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

const proxies: { close(): void }[] = [];
const connections: Redis[] = [];
afterAll(() => {
  for (const connection of connections) connection.disconnect();
  for (const proxy of proxies) proxy.close();
});

test("a holder whose renewals hang stops trusting its lease while the key still names it", async () => {
  const proxy = await freezingProxy(stack.datastoreUrl);
  proxies.push(proxy);
  const [viaProxy, direct] = [new Redis(proxy.url), new Redis(stack.datastoreUrl)];
  connections.push(viaProxy, direct);
  const key = partitionKeys(uniquePartition()).outboxLease;
  const changes: boolean[] = [];
  const lease = new PartitionLease({
    valkey: viaProxy,
    key,
    ownerId: "frozen-holder",
    // A 5 s TTL leaves a 1 s margin between the end of local trust and the key's expiry,
    // for the checks below to run in on a loaded machine.
    ttlMs: 5000,
    log: createLogger("error"),
    onChange: (held) => changes.push(held),
  });
  try {
    lease.start();
    await eventually("the lease taken", () => lease.held());
    // Long enough for renewals to have moved the deadline on.
    await Bun.sleep(2500);
    proxy.freeze();
    await eventually("trust ended", () => !lease.held(), 10_000);
    // Nobody else can take the lease before the key expires, and it still names this holder.
    expect(await direct.get(key)).toBe("frozen-holder");
    expect(await direct.pttl(key)).toBeGreaterThan(0);
    expect(changes).toEqual([true, false]);
  } finally {
    proxy.thaw();
    await lease.release();
  }
  expect(await direct.exists(key)).toBe(0);
}, 30_000);
