/**
 * The hold both services put on their writes while the Sentinels fail the primary over: it
 * holds while they forbid, says so once per hold, lets one write through past its bound, and
 * ends as soon as they no longer forbid.
 */
import { expect, test } from "bun:test";
import type { Logger } from "../../src/infra/log";
import { SentinelHold } from "../../src/infra/valkey/sentinel-hold";

function recordingLog(lines: string[]): Logger {
  const record = (message: string) => lines.push(message);
  return { debug: record, info: record, warn: record, error: record };
}

test("holds while the Sentinels forbid, once past its bound lets one write go, then holds again", async () => {
  let reason: string | undefined;
  const lines: string[] = [];
  const hold = new SentinelHold(() => reason, recordingLog(lines), "holding batches", 30);
  expect(hold.holding()).toBe(false);
  expect(lines).toEqual([]);

  reason = "a Sentinel is failing 127.0.0.1:6379 over";
  expect(hold.holding()).toBe(true);
  expect(hold.holding()).toBe(true);
  expect(lines).toEqual([
    "holding batches while the Sentinels forbid acknowledging on this primary",
  ]);

  await Bun.sleep(40);
  expect(hold.holding()).toBe(false);
  // A new hold begins at once, said again.
  expect(hold.holding()).toBe(true);
  expect(lines.length).toBe(2);

  reason = undefined;
  expect(hold.holding()).toBe(false);
  reason = "the Sentinels name another primary";
  expect(hold.holding()).toBe(true);
  expect(lines.length).toBe(3);
});
