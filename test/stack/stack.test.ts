// Starts the real private stack (Valkey primary + replica, RabbitMQ) from a process that
// exits right away, checks the contract's durability and queue guarantees, then stops it.
import { afterAll, describe, expect, test } from "bun:test";
import {
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { connect } from "amqplib";
import Redis from "ioredis";
import {
  StackError,
  type StackInfo,
  stackDown,
  stackStatus,
  stackUp,
  startValkey,
} from "../../src/stack/index";
import { freePorts } from "../../src/stack/process";
import { startRabbitmq } from "../../src/stack/rabbitmq";
import { eventually } from "../support/eventually";
import { tempDir } from "../support/temp-dir";

/** RabbitMQ boots in about 4 s; the bound leaves room for a loaded machine. */
const STACK_UP_TIMEOUT_MS = 60_000;

const dir = tempDir("matchd-stack-test-");

afterAll(async () => {
  await stackDown({ dir });
  rmSync(dir, { recursive: true, force: true });
}, STACK_UP_TIMEOUT_MS);

/** Gone means no such pid, or a zombie: this container's init does not reap orphans. */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

/** Command lines of live processes that mention `needle` (zombies have an empty one). */
function processesMentioning(needle: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ");
      if (cmdline.includes(needle)) found.push(`${entry}: ${cmdline}`);
    } catch {
      // The process exited while we looked.
    }
  }
  return found;
}

describe("local stack", () => {
  let info: StackInfo;

  test(
    "stackUp from a process that exits leaves the servers running",
    async () => {
      const started = Date.now();
      const child = Bun.spawn([process.execPath, join(import.meta.dir, "stack-up-cli.ts"), dir], {
        stdout: "pipe",
        stderr: "inherit",
      });
      const [code, stdout] = await Promise.all([child.exited, new Response(child.stdout).text()]);
      expect(code).toBe(0);
      info = JSON.parse(stdout) as StackInfo;
      console.log(`stackUp in a child process took ${Date.now() - started} ms`);
      expect(Object.keys(info.pids).sort()).toEqual(
        ["epmd", "rabbitmq", "rabbitmq-beam", "valkey-primary", "valkey-replica"].sort(),
      );
      for (const pid of Object.values(info.pids)) expect(gone(pid)).toBe(false);
      expect((await stackStatus(dir)).running).toBe(true);
      const env = readFileSync(join(dir, "env"), "utf8");
      expect(env).toContain(`MATCHING_DATASTORE_URL=${info.datastoreUrl}\n`);
      expect(env).toContain(`MATCHING_REPLICA_URL=${info.replicaUrl}\n`);
      expect(env).toContain(`MATCHING_BROKER_URL=${info.brokerUrl}\n`);
      // Services started from a shell that sourced it get the allocator setting.
      expect(env).toContain("MIMALLOC_PURGE_DELAY=-1\n");
    },
    STACK_UP_TIMEOUT_MS,
  );

  test("stackUp on a running stack returns it unchanged, marked as reused", async () => {
    expect(await stackUp({ dir })).toEqual({ ...info, reused: true });
  });

  test(
    "a node started on the AMQP port this stack's node holds fails, never taking that node for its own",
    async () => {
      const taken = Number(new URL(info.brokerUrl).port);
      const [distPort, epmdPort] = (await freePorts(2)) as [number, number];
      // A bound below the test's own, so a node that never exits fails with its message.
      const attempt = startRabbitmq({
        dir: join(dir, "late-rabbitmq"),
        ports: [taken, distPort, epmdPort],
        readyTimeoutMs: 30_000,
      });
      await expect(attempt).rejects.toMatchObject({ code: "start-failed" });
      await expect(attempt).rejects.toThrow(/is served by matchd-|exited/);
    },
    STACK_UP_TIMEOUT_MS,
  );

  test("the datastore honours WAITAOF 1 1 and the replica is a replica", async () => {
    const primary = new Redis(info.datastoreUrl);
    const replica = new Redis(info.replicaUrl);
    try {
      await primary.set("matchd:stack-test", "1");
      expect(await primary.call("WAITAOF", "1", "1", "2000")).toEqual([1, 1]);
      expect(await replica.info("replication")).toContain("role:slave");
      expect(await primary.config("GET", "appendfsync")).toEqual(["appendfsync", "always"]);
    } finally {
      primary.disconnect();
      replica.disconnect();
    }
  });

  test("the broker vhost makes command queues quorum and accepts both declarations", async () => {
    expect(info.brokerUrl).toMatch(/^amqp:\/\/guest:guest@127\.0\.0\.1:\d+\/matchd$/);
    const connection = await connect(info.brokerUrl);
    try {
      const channel = await connection.createChannel();
      const queue = "matching:commands.p0";
      await channel.assertQueue(queue, {
        durable: true,
        arguments: { "x-single-active-consumer": true },
      });
      await channel.assertQueue(queue, {
        durable: true,
        arguments: { "x-queue-type": "quorum", "x-single-active-consumer": true },
      });
      // A classic redeclaration of a quorum queue is refused, which proves the type.
      const probe = await connection.createChannel();
      probe.on("error", () => {});
      await expect(
        probe.assertQueue(queue, {
          durable: true,
          arguments: { "x-queue-type": "classic", "x-single-active-consumer": true },
        }),
      ).rejects.toThrow(/PRECONDITION_FAILED/);
    } finally {
      await connection.close();
    }
  });

  test("the broker's scheduler threads may run on every core the node may use", () => {
    const beam = info.pids["rabbitmq-beam"]!;
    const allowed = (status: string) => /^Cpus_allowed_list:\s*(\S+)$/m.exec(status)?.[1];
    const nodeCores = allowed(readFileSync(`/proc/${beam}/status`, "utf8"));
    const schedulers = readdirSync(`/proc/${beam}/task`).filter((task) =>
      /^\d+_scheduler/.test(readFileSync(`/proc/${beam}/task/${task}/comm`, "utf8")),
    );
    expect(schedulers.length).toBeGreaterThan(0);
    for (const task of schedulers) {
      expect(allowed(readFileSync(`/proc/${beam}/task/${task}/status`, "utf8"))).toBe(nodeCores);
    }
  });

  test("every port the stack's servers listen on is on loopback only", () => {
    // Sockets by inode from /proc/net/tcp{,6}: state 0A is LISTEN; the address is hex.
    const listening = new Map<string, string>();
    for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
      for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
        const fields = line.trim().split(/\s+/);
        if (fields[3] === "0A") listening.set(fields[9]!, fields[1]!);
      }
    }
    const loopback = new Set(["0100007F", "00000000000000000000000001000000"]);
    let seen = 0;
    const exposed: string[] = [];
    for (const pid of Object.values(info.pids)) {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        let target: string;
        try {
          target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        } catch {
          continue;
        }
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        const address = inode === undefined ? undefined : listening.get(inode);
        if (address === undefined) continue;
        seen++;
        if (!loopback.has(address.split(":")[0]!)) exposed.push(`pid ${pid} listens on ${address}`);
      }
    }
    // Before, RabbitMQ's inter-node (distribution) port listened on every interface.
    expect(exposed).toEqual([]);
    // Primary, replica, AMQP, the distribution port and epmd at least.
    expect(seen).toBeGreaterThanOrEqual(5);
  });

  test("stackDown stops every recorded process and leaves none behind", async () => {
    const { stopped } = await stackDown({ dir });
    expect(stopped.sort()).toEqual(Object.keys(info.pids).sort());
    for (const pid of Object.values(info.pids)) expect(gone(pid)).toBe(true);
    expect(processesMentioning(dir)).toEqual([]);
    const ports = Object.values(
      JSON.parse(readFileSync(join(dir, "stack.json"), "utf8")).ports as Record<string, number>,
    );
    for (const port of ports) expect(processesMentioning(`127.0.0.1:${port}`)).toEqual([]);
    expect((await stackStatus(dir)).running).toBe(false);
    expect(await stackDown({ dir })).toEqual({ stopped: [] });
  }, 30_000);
});

describe("a start that never finished", () => {
  test("leaves a record that stackDown uses to stop what was spawned", async () => {
    const partial = join(dir, "partial");
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "stack-up-cli.ts"), partial], {
      stdout: "ignore",
      stderr: "ignore",
    });
    // Killed once every server is spawned and recorded (the replica is the last): RabbitMQ
    // then still needs seconds to boot, so the start is in progress.
    await eventually(
      "every server recorded",
      async () => {
        const names = (await stackStatus(partial).catch(() => undefined))?.processes.map(
          (p) => p.name,
        );
        return names?.includes("rabbitmq") === true && names.includes("valkey-replica");
      },
      20_000,
    );
    child.kill("SIGKILL");
    await child.exited;
    const status = await stackStatus(partial);
    expect(status.info).toBeUndefined();
    expect(status.processes.length).toBeGreaterThan(0);
    await expect(stackUp({ dir: partial })).rejects.toMatchObject({ code: "stale-stack" });
    const { stopped } = await stackDown({ dir: partial });
    expect(stopped.length).toBeGreaterThan(0);
    for (const p of status.processes) expect(gone(p.pid)).toBe(true);
    expect(processesMentioning(partial)).toEqual([]);
  }, 60_000);
});

describe("startValkey", () => {
  test("starts a lone primary with appendonly off and stops it", async () => {
    const server = await startValkey({ dir: join(dir, "lone"), appendonly: false });
    const client = new Redis(server.url);
    try {
      expect(await client.config("GET", "appendonly")).toEqual(["appendonly", "no"]);
      expect(await client.info("replication")).toContain("role:master");
    } finally {
      client.disconnect();
      // Stopped even when a check failed: its directory is removed after the last file.
      await server.stop();
    }
    expect(gone(server.pid)).toBe(true);
  });

  test("a missing binary is a missing-binary StackError naming the fix", async () => {
    const attempt = startValkey({
      dir: join(dir, "none"),
      appendonly: true,
      binary: "/nonexistent/valkey-server",
    });
    await expect(attempt).rejects.toBeInstanceOf(StackError);
    await expect(attempt).rejects.toMatchObject({ code: "missing-binary" });
  });

  test("a server that refuses its config fails with start-failed and its log", async () => {
    const attempt = startValkey({
      dir: join(dir, "bad"),
      appendonly: true,
      extraArgs: ["no-such-directive 1"],
    });
    await expect(attempt).rejects.toMatchObject({ code: "start-failed" });
    await expect(attempt).rejects.toThrow(/no-such-directive/);
  });

  test("a port another server took is a failed start, never that server taken for ours", async () => {
    const other = await startValkey({ dir: join(dir, "other"), appendonly: false });
    try {
      const attempt = startValkey({ dir: join(dir, "late"), appendonly: false, port: other.port });
      await expect(attempt).rejects.toMatchObject({ code: "start-failed" });
      await expect(attempt).rejects.toThrow(/Address already in use|answered from process/);
    } finally {
      await other.stop();
    }
  });
});

describe("the stack directory's lock", () => {
  test("a start or stop while another live process holds the directory is refused; a dead holder's lock is taken over", async () => {
    const locked = tempDir("matchd-stack-lock-");
    // A live holder that is not this process: a sleeping child.
    const holder = Bun.spawn(["sleep", "30"]);
    try {
      // Its start time (field 22 of /proc/PID/stat), which the lock records beside the pid.
      const stat = readFileSync(`/proc/${holder.pid}/stat`, "utf8");
      const ticks = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
      writeFileSync(join(locked, ".lock"), `${holder.pid} ${ticks}\n`);
      const up = await stackUp({ dir: locked }).catch((error: unknown) => error);
      expect(up).toBeInstanceOf(StackError);
      expect((up as StackError).code).toBe("busy");
      const down = await stackDown({ dir: locked }).catch((error: unknown) => error);
      expect((down as StackError).code).toBe("busy");
    } finally {
      holder.kill();
      await holder.exited;
      // The holder is gone: its lock is stale and taken over. (Were the lock ignored, this
      // also stops the stack the refused start would have started.)
      const stopped = await stackDown({ dir: locked });
      expect(stopped).toEqual({ stopped: [] });
    }
    expect(existsSync(join(locked, ".lock"))).toBe(false);
  });
});
