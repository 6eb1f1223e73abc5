// Both services against a datastore that is down at boot: HTTP answers (the contract's
// /metrics must, while a dependency is down), /readyz says why it is not ready, the policy is
// checked once the datastore answers, and a SIGTERM meanwhile ends the process with exit 0;
// past the boot wait (MATCHING_BOOT_WAIT_S) it is refused.

import { afterEach, expect, test } from "bun:test";
import { freePorts } from "../../src/stack/process";
import { disposeAll, eventually, startConductor } from "../conductor/helpers";
import { startOutbox } from "../outbox/helpers";
import { spawnMatchd, testStack, uniquePartition } from "../support/stack";

afterEach(disposeAll);

async function expectWaiting(baseUrl: string): Promise<void> {
  await eventually("HTTP answers", async () => {
    try {
      return (await fetch(`${baseUrl}/metrics`)).status === 200;
    } catch {
      return false;
    }
  });
  const metrics = await fetch(`${baseUrl}/metrics`, { headers: { accept: "application/json" } });
  expect(typeof (await metrics.json())).toBe("object");
  const ready = await fetch(`${baseUrl}/readyz`);
  expect(ready.status).toBe(503);
  expect(JSON.stringify(await ready.json())).toContain("durability policy not verified yet");
}

test("a conductor whose datastore is down at boot serves /metrics, is not ready, and stops with exit 0", async () => {
  const stack = await testStack();
  const closedPort = (await freePorts(1))[0]!;
  const conductor = await startConductor(stack, uniquePartition(), {
    datastoreUrl: `redis://127.0.0.1:${closedPort}`,
    waitReady: false,
  });
  await expectWaiting(conductor.url);
  expect(conductor.log()).toContain("datastore unreachable at boot");
  expect(conductor.process.exitCode).toBeNull();
  expect(await conductor.stop()).toBe(0);
}, 60_000);

test("an outbox whose datastore is down at boot serves /metrics, is not ready, and stops with exit 0", async () => {
  const stack = await testStack();
  const closedPort = (await freePorts(1))[0]!;
  const outbox = await startOutbox(
    { ...stack, datastoreUrl: `redis://127.0.0.1:${closedPort}` },
    uniquePartition(),
    [],
    {},
    { waitPolicy: false },
  );
  try {
    await expectWaiting(outbox.metricsUrl.replace(/\/metrics$/, ""));
    expect(outbox.stderr()).toContain("datastore unreachable at boot");
    expect(await outbox.stop()).toBe(0);
  } finally {
    if (outbox.process.exitCode === null) await outbox.kill9();
  }
}, 60_000);

test("a datastore that answers with an error (a password it does not take) is refused at once, exit 3: waiting would not mend it", async () => {
  const stack = await testStack();
  const url = new URL(stack.datastoreUrl);
  // A user the server does not know: AUTH answers WRONGPASS.
  url.username = "nobody";
  url.password = "not-the-password";
  const { child, log } = spawnMatchd(["conductor", "--http-port", "0"], {
    MATCHING_DATASTORE_URL: url.toString(),
    MATCHING_BROKER_URL: stack.brokerUrl,
  });
  try {
    expect(await Promise.race([child.exited, Bun.sleep(20_000).then(() => "still running")])).toBe(
      3,
    );
    await eventually("the reason printed", () =>
      log().includes("the datastore refused the connection: WRONGPASS"),
    );
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}, 60_000);

test("a datastore still unreachable after MATCHING_BOOT_WAIT_S is refused, exit 3, naming the wait", async () => {
  const stack = await testStack();
  const closedPort = (await freePorts(1))[0]!;
  const started = performance.now();
  const { child, log } = spawnMatchd(["conductor", "--http-port", "0"], {
    MATCHING_DATASTORE_URL: `redis://127.0.0.1:${closedPort}`,
    MATCHING_BROKER_URL: stack.brokerUrl,
    MATCHING_BOOT_WAIT_S: "2",
  });
  try {
    expect(await Promise.race([child.exited, Bun.sleep(20_000).then(() => "still running")])).toBe(
      3,
    );
    expect(performance.now() - started).toBeGreaterThan(2000);
    await eventually("the reason printed", () =>
      log().includes("the datastore could not be reached for 2 s (MATCHING_BOOT_WAIT_S)"),
    );
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}, 60_000);
