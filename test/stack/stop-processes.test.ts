// stopProcesses on a process group whose leader exits on SIGTERM before its child: the
// shape of RabbitMQ's wrapper signalled between starting beam.smp and noting its pid.
import { afterEach, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  childrenNamed,
  isRunning,
  processStartTicks,
  spawnDetached,
  stopProcesses,
} from "../../src/stack/process";
import { eventually } from "../support/eventually";
import { tempDir } from "../support/temp-dir";

/** The sleeps each test started, killed afterwards if a failed test left them running. */
const started: { pid: number; startTicks: number | undefined }[] = [];
afterEach(() => {
  for (const { pid, startTicks } of started.splice(0)) {
    try {
      if (isRunning(pid, startTicks)) process.kill(pid, "SIGKILL");
    } catch {
      // Exited between the check and the kill.
    }
  }
});

/** A shell that exits on SIGTERM without passing it on, and the sleep it leaves behind. */
async function leaderWithChild(): Promise<{
  dir: string;
  leader: number;
  leaderTicks?: number;
  child: number;
}> {
  const dir = tempDir("matchd-stop-group-");
  const leader = spawnDetached("sh", ["-c", 'trap "exit 0" TERM; sleep 300 & wait'], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    logFile: join(dir, "leader.log"),
    cwd: dir,
  });
  await eventually(
    "the leader's sleep",
    () => childrenNamed(leader.pid, "sleep").length > 0,
    5_000,
  );
  const child = childrenNamed(leader.pid, "sleep")[0]!;
  started.push({ pid: child, startTicks: processStartTicks(child) });
  return { dir, leader: leader.pid, leaderTicks: processStartTicks(leader.pid), child };
}

test("a group leader that exits first does not leave its child running", async () => {
  const { leader, leaderTicks, child } = await leaderWithChild();
  const stopped = await stopProcesses(
    [{ pid: leader, startTicks: leaderTicks, group: true }],
    5_000,
  );
  expect(stopped).toEqual([leader]);
  expect(isRunning(leader)).toBe(false);
  expect(isRunning(child)).toBe(false);
}, 20_000);

test("a group whose leader was already gone before the stop still has its orphans stopped", async () => {
  const { dir, leader, leaderTicks, child } = await leaderWithChild();
  process.kill(leader, "SIGTERM");
  // Reaped, not merely a zombie (its own zombie would prove the group by itself).
  await eventually("the leader reaped", () => !existsSync(`/proc/${leader}`), 5_000);
  expect(isRunning(child)).toBe(true);
  // Without proof that the group is the stack's (a member working in its directory), it
  // is left alone: its id could belong to an unrelated group by now.
  const target = { pid: leader, startTicks: leaderTicks, group: true };
  expect(await stopProcesses([target], 5_000, "/nonexistent-stack-dir")).toEqual([]);
  // A directory whose name merely starts the same is not proof either.
  expect(await stopProcesses([target], 5_000, dir.slice(0, -1))).toEqual([]);
  expect(isRunning(child)).toBe(true);
  expect(await stopProcesses([target], 5_000, dir)).toEqual([leader]);
  expect(isRunning(child)).toBe(false);
}, 20_000);
