// Runs the datastore commit-shape bench small against the test stack's primary + replica
// (AOF, appendfsync always) and checks it reports both policies and cleans up its keys.

import { expect, test } from "bun:test";
import { runDatastoreBench } from "../../bench/datastore-bench";
import { collectEnvironment, environmentFacts } from "../../bench/environment";
import { createValkey } from "../../src/infra/valkey/client";
import { partitionKeys } from "../../src/infra/valkey/keys";
import { testStack } from "../support/stack";

test("datastore bench measures both policies and deletes what it wrote", async () => {
  const { datastoreUrl } = await testStack();
  // A key space of its own, far from uniquePartition()'s range, so parallel tests never collide.
  const partitionBase = 20_000 + Math.floor(Math.random() * 10_000) * 4;
  const lines: string[] = [];
  const result = await runDatastoreBench({
    datastoreUrl,
    transactions: 200,
    connections: [1, 2],
    durabilityTimeoutMs: 2000,
    partitionBase,
    waitSamples: 50,
    log: (line) => lines.push(line),
  });

  expect(result.rows.map((r) => `${r.policy} x${r.connections}`)).toEqual([
    "memory x1",
    "memory x2",
    "aof-replicated x1",
    "aof-replicated x2",
  ]);
  for (const row of result.rows) {
    expect(row.transactions).toBe(200);
    expect(row.txPerSecond).toBeGreaterThan(0);
    expect(row.latencyMs.p50).toBeGreaterThan(0);
    expect(row.latencyMs.max).toBeGreaterThanOrEqual(row.latencyMs.p99);
  }
  expect(result.waitDurableMs.p50).toBeGreaterThan(0);
  expect(result.server.replicasBefore).toBeGreaterThanOrEqual(1);
  expect(result.server.appendonly).toBe("yes");
  expect(result.keysLeft).toBe(0);
  expect(lines.length).toBe(5);

  // Checked independently of the bench's own count.
  const valkey = createValkey(datastoreUrl, { name: "datastore-bench-test" });
  try {
    for (const i of [0, 1]) {
      const pattern = `${partitionKeys(partitionBase + i).prefix}*`;
      let cursor = "0";
      do {
        const [next, keys] = await valkey.scan(cursor, "MATCH", pattern, "COUNT", 1000);
        expect(keys).toEqual([]);
        cursor = next;
      } while (cursor !== "0");
    }
  } finally {
    valkey.disconnect();
  }
}, 120_000);

test("environment is read from the running servers", async () => {
  const { datastoreUrl, brokerUrl } = await testStack();
  const environment = await collectEnvironment({ datastoreUrl, brokerUrl });
  expect(environment.cores).toBeGreaterThan(0);
  expect(environment.bun).toBe(Bun.version);
  expect(environment.datastore?.version.value).toMatch(/^\d+\.\d+/);
  expect(environment.datastore?.appendonly.value).toBe("yes");
  expect(environment.datastore?.role.value).toBe("master");
  expect(Number(environment.datastore?.connectedReplicas.value)).toBeGreaterThanOrEqual(1);
  expect(environment.broker?.product.value).toBe("RabbitMQ");
  expect(environment.broker?.version.value).toMatch(/^\d+\.\d+/);
  expect(environment.broker?.url).not.toContain("guest:guest");
});

test("environment probes of absent servers answer 'unknown' with a reason, quickly", async () => {
  const started = performance.now();
  // Port 1 on loopback refuses connections; nothing listens there.
  const environment = await collectEnvironment({
    datastoreUrl: "redis://127.0.0.1:1",
    brokerUrl: "amqp://127.0.0.1:1",
  });
  expect(performance.now() - started).toBeLessThan(5000);
  expect(environment.datastore?.version).toEqual({
    value: "unknown",
    reason: expect.stringContaining("cannot connect"),
  });
  expect(environment.broker?.version.value).toBe("unknown");
  expect(environment.broker?.version.reason).toContain("cannot connect");
  expect(environmentFacts(environment).find(([label]) => label === "valkey")?.[1]).toContain(
    "unknown",
  );
});
