/** The command trace: its ring keeps the latest records in order; the breakdown's means. */
import { expect, test } from "bun:test";
import { describeTrace, type TracedCommand } from "../../bench/trace-breakdown";
import { CommandTrace } from "../../src/conductor/trace";

test("the trace samples one in N and keeps the latest records, oldest first", () => {
  const trace = new CommandTrace(4, 3);
  const sampled = Array.from({ length: 8 }, () => trace.sampled());
  expect(sampled).toEqual([true, false, false, false, true, false, false, false]);
  const record = (id: number) => ({
    commandId: `c${id}`,
    receivedMs: id,
    takenMs: id,
    committedMs: id,
    durableMs: id,
    ackedMs: id,
  });
  for (let id = 1; id <= 5; id++) trace.record(record(id));
  expect(trace.all().map((r) => r.commandId)).toEqual(["c3", "c4", "c5"]);
});

test("the breakdown gives each stage's mean, over all and over the slowest 1 %", () => {
  // Stages of 1, 2, 3, 4, 5, 6 ms (total 21), and one command ten times slower in each.
  const command = (id: string, scale: number): TracedCommand => ({
    commandId: id,
    sentMs: 0,
    receivedMs: 1 * scale,
    takenMs: 3 * scale,
    committedMs: 6 * scale,
    durableMs: 10 * scale,
    ackedMs: 15 * scale,
    endMs: 21 * scale,
  });
  const commands = [
    ...Array.from({ length: 99 }, (_, i) => command(`c${i}`, 1)),
    command("slow", 10),
  ];
  expect(describeTrace(commands, 8)).toBe(
    "100 commands traced (1 in 8), mean per stage: all: broker in 1.09, conductor queue 2.18, commit 3.27, durability 4.36, acknowledge 5.45, after ack 6.54 (total 22.89) ms; " +
      "slowest 1 % (1): broker in 10.00, conductor queue 20.00, commit 30.00, durability 40.00, acknowledge 50.00, after ack 60.00 (total 210.00) ms",
  );
  expect(describeTrace([], 8)).toBe("no traced command in the timed window");
});
