// The conductor's process lifecycle: a SIGTERM that arrives while it is still waiting for
// an unreachable broker at boot ends it cleanly, with exit 0.

import { afterEach, expect, test } from "bun:test";
import { freePorts } from "../../src/stack/process";
import { testStack, uniquePartition } from "../support/stack";
import { disposeAll, eventually, startConductor } from "./helpers";

afterEach(disposeAll);

test("SIGTERM while the broker is unreachable at boot exits 0", async () => {
  const stack = await testStack();
  const closedPort = (await freePorts(1))[0]!;
  const conductor = await startConductor(
    { ...stack, brokerUrl: `amqp://guest:guest@127.0.0.1:${closedPort}/` },
    uniquePartition(),
    { waitReady: false },
  );
  await eventually("retrying the broker", () => conductor.log().includes("broker not reachable"));
  expect(await conductor.stop()).toBe(0);
  // The log is read in the background: its last line may arrive just after the exit.
  await eventually("the early stop logged", () =>
    conductor.log().includes("before it started consuming"),
  );
}, 30_000);

test("a second SIGTERM during the stop is logged and ignored: the stop finishes, exit 0", async () => {
  const stack = await testStack();
  const conductor = await startConductor(stack, uniquePartition());
  conductor.process.kill("SIGTERM");
  await Bun.sleep(1);
  conductor.process.kill("SIGTERM");
  expect(await conductor.process.exited).toBe(0);
  await eventually("the second signal logged", () =>
    conductor.log().includes("already shutting down; signal ignored"),
  );
}, 30_000);
