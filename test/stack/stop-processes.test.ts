// stopProcesses on a process group whose leader exits on SIGTERM before its child: the
// shape of RabbitMQ's wrapper signalled between starting beam.smp and noting its pid.
import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  childrenNamed,
  isRunning,
  processStartTicks,
  spawnDetached,
  stopProcesses,
} from "../../src/stack/process";
import { eventually } from "../support/eventually";

test("a group leader that exits first does not leave its child running", async () => {
  const dir = mkdtempSync(join(tmpdir(), "matchd-stop-group-"));
  // The shell exits on SIGTERM without passing it on, so its sleep outlives it unless the
  // whole group is stopped.
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
  const stopped = await stopProcesses(
    [{ pid: leader.pid, startTicks: processStartTicks(leader.pid), group: true }],
    5_000,
  );
  expect(stopped).toEqual([leader.pid]);
  expect(isRunning(leader.pid)).toBe(false);
  expect(isRunning(child)).toBe(false);
}, 20_000);
