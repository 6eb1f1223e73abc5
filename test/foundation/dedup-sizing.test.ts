/**
 * What the dedup window costs, as the conductor's boot and `matchd check` state it, and the
 * datastore memory gauges, against a private Valkey whose maxmemory the test sets.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import Redis from "ioredis";
import { MetricsRegistry } from "../../src/infra/metrics";
import { createValkey } from "../../src/infra/valkey/client";
import { checkDedupSizing, dedupWindowBytes } from "../../src/infra/valkey/dedup-sizing";
import { expiringKeys, exposeDatastoreMemory } from "../../src/infra/valkey/memory-gauges";
import { type RunningValkey, startValkey } from "../../src/stack/index";
import { eventually } from "../support/eventually";
import { matchdCommand } from "../support/stack";
import { tempDir } from "../support/temp-dir";

let server: RunningValkey;
let admin: Redis;

beforeAll(async () => {
  server = await startValkey({ dir: join(tempDir("dedup-sizing"), "valkey"), appendonly: false });
  admin = new Redis(server.url);
});

afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

describe("dedup window sizing", () => {
  test("without maxmemory: the window's size is stated, no warning", async () => {
    await admin.config("SET", "maxmemory", "0");
    const valkey = createValkey(server.url, { name: "matchd-test" });
    const outcome = await checkDedupSizing(valkey, 3600, 2000).finally(() => valkey.disconnect());
    expect(dedupWindowBytes(2000, 3600)).toBe(2_304_000_000);
    expect(outcome).toMatchObject({ ok: true, name: "dedup window fits in memory" });
    expect(outcome.warning).toBeUndefined();
    expect(outcome.detail).toContain("holds about 2.30 GB");
    expect(outcome.detail).toContain("no maxmemory is set");
  });

  test("a maxmemory too small for the window, and a window under an hour, are warned about", async () => {
    await admin.config("SET", "maxmemory", String(100 * 1024 * 1024));
    const valkey = createValkey(server.url, { name: "matchd-test" });
    try {
      const small = await checkDedupSizing(valkey, 3600, 2000);
      expect(small).toMatchObject({ ok: true, warning: true });
      // 104,857,600 B / (3,600 s × 320 B) = 91 commands/s.
      expect(small.detail).toContain("holds the window up to 91 commands/s");
      expect(small.detail).toContain("cannot hold it");
      const fits = await checkDedupSizing(valkey, 3600, 40);
      expect(fits.warning).toBeUndefined();
      const short = await checkDedupSizing(valkey, 60, 40);
      expect(short.warning).toBe(true);
      expect(short.detail).toContain("under an hour");
    } finally {
      valkey.disconnect();
      await admin.config("SET", "maxmemory", "0");
    }
  });

  test("matchd check prints the statement", async () => {
    const child = Bun.spawn(
      [...matchdCommand, "check", "--durability", "memory", "--expected-rate", "1000"],
      {
        env: {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          MATCHING_DATASTORE_URL: server.url,
          MATCHING_DEDUP_RETENTION_S: "600",
        },
        stdout: "pipe",
        stderr: "ignore",
      },
    );
    const stdout = await new Response(child.stdout).text();
    await child.exited;
    expect(stdout).toContain("WARN dedup window fits in memory: the 600 s dedup window at 1000");
  });
});

describe("datastore memory gauges", () => {
  test("used memory, maxmemory and the keys with a TTL, from INFO", async () => {
    expect(expiringKeys(new Map([["db0", "keys=5,expires=3,avg_ttl=100"]]), 0)).toBe(3);
    expect(expiringKeys(new Map(), 0)).toBe(0);
    await admin.set("dedup-sizing-a", "1", "EX", 60);
    await admin.set("dedup-sizing-b", "1", "EX", 60);
    const registry = new MetricsRegistry();
    const valkey = createValkey(server.url, { name: "matchd-test" });
    const gauges = exposeDatastoreMemory(registry, valkey);
    try {
      await eventually("sampled", () => Number(registry.toJson().matching_dedup_window_keys) >= 2);
      expect(Number(registry.toJson().matching_datastore_used_memory_bytes)).toBeGreaterThan(0);
      expect(registry.toJson().matching_datastore_maxmemory_bytes).toBe(0);
    } finally {
      gauges.stop();
      valkey.disconnect();
    }
  });
});
