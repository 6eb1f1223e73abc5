/**
 * The durability policy at boot against real Valkey servers: `matchd check` and the
 * conductor refuse (exit 3, naming the reason) when aof-replicated cannot be honoured,
 * and pass against the private stack.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import Redis from "ioredis";
import { type RunningValkey, startValkey } from "../../src/stack/index";
import { eventually } from "../support/eventually";
import { runToEnd } from "../support/run-to-end";
import { matchdCommand, spawnMatchd, stackStartTimeoutMs, testStack } from "../support/stack";
import { tempDir } from "../support/temp-dir";
import { startValkeyPair } from "../support/valkey-pair";

function matchd(args: string[], env: Record<string, string>) {
  return runToEnd([...matchdCommand, ...args], {
    env: { ...process.env, MATCHING_DURABILITY_TIMEOUT_MS: "500", ...env },
    killAfterMs: 30_000,
  });
}

describe("durability policy at boot", () => {
  const servers: RunningValkey[] = [];
  let noAof: RunningValkey;
  let lonePrimary: RunningValkey;

  beforeAll(async () => {
    const dir = tempDir("matchd-boot-");
    noAof = await startValkey({ dir: join(dir, "no-aof"), appendonly: false });
    lonePrimary = await startValkey({ dir: join(dir, "lone"), appendonly: true });
    servers.push(noAof, lonePrimary);
  }, stackStartTimeoutMs);
  afterAll(async () => {
    for (const server of servers) await server.stop();
  }, 60_000);

  test("appendonly off: check exits 3 and names it", async () => {
    const { stdout, code } = await matchd(["check"], { MATCHING_DATASTORE_URL: noAof.url });
    expect(code).toBe(3);
    expect(stdout).toContain("FAIL appendonly on");
  });

  test("a replica without AOF: the probe write is never fsynced there, check exits 3", async () => {
    const dir = tempDir("matchd-boot-replica-");
    const primary = await startValkey({ dir: join(dir, "primary"), appendonly: true });
    const replica = await startValkey({
      dir: join(dir, "replica"),
      appendonly: false,
      replicaOf: `127.0.0.1:${primary.port}`,
    });
    servers.push(primary, replica);
    const admin = new Redis(primary.url);
    try {
      // Wait until the replica is attached, so the failure is its missing fsync, not its absence.
      await eventually(
        "the replica attached",
        async () => (await admin.info("replication")).includes("connected_slaves:1"),
        20_000,
      );
    } finally {
      admin.disconnect();
    }
    const { stdout, code } = await matchd(["check"], { MATCHING_DATASTORE_URL: primary.url });
    expect(stdout).toContain("PASS replica connected");
    expect(stdout).toContain(
      `FAIL replica 127.0.0.1:${replica.port} appendonly yes, appendfsync always: appendonly is off`,
    );
    expect(stdout).toContain("FAIL probe write fsynced on primary and replica");
    expect(code).toBe(3);
  }, 30_000);

  test("appendfsync everysec on the replica, then on the primary: check exits 3 and names the server", async () => {
    const pair = await startValkeyPair("matchd-boot-everysec-");
    servers.push(pair.primary, pair.replica);
    const onReplica = new Redis(pair.replica.url);
    const onPrimary = new Redis(pair.primary.url);
    const replicaCheck = `replica 127.0.0.1:${pair.replica.port} appendonly yes, appendfsync always`;
    try {
      await onReplica.call("CONFIG", "SET", "appendfsync", "everysec");
      const replicaSlow = await matchd(["check"], { MATCHING_DATASTORE_URL: pair.primary.url });
      expect(replicaSlow.stdout).toContain("PASS appendfsync always on the primary");
      expect(replicaSlow.stdout).toContain(`FAIL ${replicaCheck}: appendfsync is everysec`);
      expect(replicaSlow.code).toBe(3);

      await onReplica.call("CONFIG", "SET", "appendfsync", "always");
      await onPrimary.call("CONFIG", "SET", "appendfsync", "everysec");
      const primarySlow = await matchd(["check"], { MATCHING_DATASTORE_URL: pair.primary.url });
      expect(primarySlow.stdout).toContain(
        "FAIL appendfsync always on the primary: appendfsync is everysec",
      );
      expect(primarySlow.stdout).toContain(`PASS ${replicaCheck}`);
      expect(primarySlow.code).toBe(3);

      // A replica that refuses the primary's credentials (ACL users are not replicated)
      // cannot be asked: a warning, not a refusal; the probe's WAITAOF still has to pass.
      await onPrimary.call("CONFIG", "SET", "appendfsync", "always");
      await onPrimary.call("ACL", "SETUSER", "primaryonly", "on", ">pw", "~*", "&*", "+@all");
      const primaryOnly = pair.primary.url.replace("redis://", "redis://primaryonly:pw@");
      const unseen = await matchd(["check"], {
        MATCHING_DATASTORE_URL: primaryOnly,
        MATCHING_BROKER_URL: (await testStack()).brokerUrl,
        MATCHING_DURABILITY_TIMEOUT_MS: "2000",
      });
      expect(unseen.stdout).toContain("WRONGPASS");
      expect(unseen.stdout).toContain(`WARN ${replicaCheck}: not verified`);
      expect(unseen.stdout).toContain("PASS probe write fsynced on primary and replica");
      expect(unseen.stdout).not.toContain("FAIL");
      expect(unseen.code).toBe(0);
    } finally {
      onReplica.disconnect();
      onPrimary.disconnect();
    }
  }, 60_000);

  test("a lone primary: check exits 3 and names the missing replica", async () => {
    const { stdout, code } = await matchd(["check"], { MATCHING_DATASTORE_URL: lonePrimary.url });
    expect(code).toBe(3);
    expect(stdout).toContain("FAIL replica connected");
    expect(stdout).toContain("PASS appendonly on");
  });

  test("a replica given as the primary: check exits 3", async () => {
    const stack = await testStack();
    const { stdout, code } = await matchd(["check"], {
      MATCHING_DATASTORE_URL: stack.replicaUrl,
      MATCHING_BROKER_URL: stack.brokerUrl,
    });
    expect(code).toBe(3);
    expect(stdout).toContain("FAIL primary role");
  });

  test.each(["conductor", "outbox"])(
    "the %s refuses to boot (exit 3) against a lone primary",
    async (service) => {
      const stack = await testStack();
      const { stderr, code } = await matchd([service, "--http-port", "0"], {
        MATCHING_DATASTORE_URL: lonePrimary.url,
        MATCHING_BROKER_URL: stack.brokerUrl,
      });
      expect(code).toBe(3);
      expect(stderr).toContain("refusing to boot");
      expect(stderr).toContain("replica connected");
    },
  );

  test("a server that may evict keys is refused under either policy; noeviction passes", async () => {
    const admin = new Redis(lonePrimary.url);
    const env = {
      MATCHING_DATASTORE_URL: lonePrimary.url,
      MATCHING_BROKER_URL: (await testStack()).brokerUrl,
      MATCHING_DURABILITY: "memory",
    };
    try {
      await admin.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru");
      const evicting = await matchd(["check"], env);
      expect(evicting.stdout).toContain(
        "FAIL maxmemory-policy noeviction: maxmemory-policy is allkeys-lru: at maxmemory the server would evict books and dedup markers",
      );
      expect(evicting.code).toBe(3);
      const aofReplicated = await matchd(["check"], {
        ...env,
        MATCHING_DURABILITY: "aof-replicated",
      });
      expect(aofReplicated.stdout).toContain("FAIL maxmemory-policy noeviction");
      await admin.call("CONFIG", "SET", "maxmemory-policy", "noeviction");
      const kept = await matchd(["check"], env);
      expect(kept.stdout).toContain("PASS maxmemory-policy noeviction");
      expect(kept.code).toBe(0);
    } finally {
      await admin.call("CONFIG", "SET", "maxmemory-policy", "noeviction");
      admin.disconnect();
    }
  }, 60_000);

  test("memory policy boots with a loud warning against a lone primary", async () => {
    const stack = await testStack();
    const { child, log } = spawnMatchd(
      ["outbox", "--http-port", "0", "--partition", "7", "--partition-count", "8"],
      {
        MATCHING_DATASTORE_URL: lonePrimary.url,
        MATCHING_BROKER_URL: stack.brokerUrl,
        MATCHING_DURABILITY: "memory",
      },
    );
    // Polls the collected stderr, so a silent child cannot outlast the 20 s deadline.
    const deadline = Date.now() + 20_000;
    while (!log().includes("CAN BE LOST") && Date.now() < deadline) await Bun.sleep(50);
    child.kill("SIGTERM");
    await child.exited;
    const seen = log();
    expect(seen).toContain("DURABILITY POLICY memory");
  });

  test("a user denied CONFIG fails the appendfsync check, one granted only CONFIG GET passes it; one denied COMMAND gets a failed check, not a crash, and the other checks", async () => {
    const admin = new Redis(lonePrimary.url);
    try {
      await admin.call("ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config");
      await admin.call(
        "ACL",
        "SETUSER",
        "configget",
        "on",
        ">pw",
        "~*",
        "&*",
        "+@all",
        "-config",
        "+config|get",
      );
      await admin.call("ACL", "SETUSER", "nocommand", "on", ">pw", "~*", "&*", "+@all", "-command");
      const url = (user: string) => lonePrimary.url.replace("redis://", `redis://${user}:pw@`);
      const noConfig = await matchd(["check"], { MATCHING_DATASTORE_URL: url("noconfig") });
      // appendonly is read from INFO, so it is still named right; the fsync setting has no
      // INFO field, and a server that will not show it cannot show the policy holds.
      expect(noConfig.stdout).toContain("PASS appendonly on");
      expect(noConfig.stdout).toContain(
        "FAIL appendfsync always on the primary: could not be checked",
      );
      expect(noConfig.stdout).toContain("+config|get");
      expect(noConfig.code).toBe(3);
      const configGet = await matchd(["check"], { MATCHING_DATASTORE_URL: url("configget") });
      expect(configGet.stdout).toContain("PASS appendfsync always on the primary");
      expect(configGet.stdout).toContain("FAIL replica connected");
      const noCommand = await matchd(["check"], { MATCHING_DATASTORE_URL: url("nocommand") });
      expect(noCommand.stdout).toContain("FAIL WAITAOF supported: could not be checked");
      // The checks after it still run: the refusal names every problem at once.
      expect(noCommand.stdout).toContain("PASS primary role");
      expect(noCommand.stdout).toContain("PASS appendonly on");
      expect(noCommand.stdout).toContain("FAIL replica connected");
      expect(noCommand.code).toBe(3);
      expect(noCommand.stderr).not.toContain("at ");
    } finally {
      admin.disconnect();
    }
  });

  test("everything passes against the private stack (exit 0)", async () => {
    const stack = await testStack();
    const { stdout, code } = await matchd(["check"], {
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      MATCHING_BROKER_URL: stack.brokerUrl,
      // The default bound: 500 ms (for the tests that expect a failure) is one slow fsync.
      MATCHING_DURABILITY_TIMEOUT_MS: "2000",
    });
    expect(stdout).not.toContain("FAIL");
    expect(code).toBe(0);
    expect(stdout).toContain("PASS probe write fsynced on primary and replica");
    expect(stdout).toContain("PASS broker reachable");
  });
});
