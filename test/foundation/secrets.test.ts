/**
 * Secrets stay secret: with a datastore password (an ACL user of its own on the test
 * primary) and an HTTP token, nothing a run prints — the services' logs, /metrics in both
 * forms, /readyz, matchd check, the client commands, a bench report, and the errors of a
 * wrong password — holds either of them.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { freePorts } from "../../src/stack/process";
import { runToEnd } from "../support/run-to-end";
import {
  matchdCommand,
  spawnMatchd,
  stackStartTimeoutMs,
  type TestStack,
  testStack,
  uniquePartition,
} from "../support/stack";

const password = "pw-7f3a9c1e-do-not-print";
const token = "tok-51b2d8e4-do-not-print";
const user = `secret-test-${process.pid}`;
let stack: TestStack;
let admin: Redis;
let datastoreUrl: string;

beforeAll(async () => {
  stack = await testStack();
  admin = new Redis(stack.datastoreUrl);
  // The user exists on the primary only (ACL users are not replicated): the boot check
  // then warns that it cannot ask the replica, and that warning is printed too.
  await admin.acl("SETUSER", user, "on", `>${password}`, "~*", "&*", "+@all");
  const url = new URL(stack.datastoreUrl);
  url.username = user;
  url.password = password;
  datastoreUrl = url.toString();
}, stackStartTimeoutMs);

afterAll(async () => {
  await admin.acl("DELUSER", user);
  admin.disconnect();
});

test("no output of a run holds the datastore password or the HTTP token", async () => {
  const outputs: string[] = [];
  const partition = uniquePartition();
  const env = {
    MATCHING_DATASTORE_URL: datastoreUrl,
    MATCHING_BROKER_URL: stack.brokerUrl,
    MATCHING_PARTITION_COUNT: "1024",
    MATCHING_HTTP_TOKEN: token,
  };
  const run = async (args: string[], extra: Record<string, string> = {}) => {
    const done = await runToEnd([...matchdCommand, ...args], {
      env: { PATH: process.env.PATH, ...env, ...extra },
      killAfterMs: 60_000,
    });
    outputs.push(`$ matchd ${args.join(" ")}\n${done.stdout}${done.stderr}`);
    return done;
  };
  const [conductorPort, outboxPort] = await freePorts(2);
  const conductor = spawnMatchd(
    ["conductor", "--partition", String(partition), "--http-port", String(conductorPort)],
    env,
  );
  const outbox = spawnMatchd(
    ["outbox", "--partition", String(partition), "--http-port", String(outboxPort)],
    env,
  );
  try {
    const conductorUrl = `http://127.0.0.1:${conductorPort}`;
    const placed = await run([
      "order",
      "place",
      "--pair",
      String(partition),
      "--side",
      "bid",
      "--price",
      "1",
      "--volume",
      "1",
      "--json",
    ]);
    expect(placed.code).toBe(0);
    const { commandId } = JSON.parse(placed.stdout) as { commandId: string };
    expect((await run(["result", commandId, "--conductor-url", conductorUrl])).code).toBe(0);
    await run(["book", String(partition), "--conductor-url", conductorUrl]);
    await run(["check"]);
    await run(["bench", "datastore", "--commands", "100", "--json"]);
    // A wrong password: refused, and the refusal names neither secret.
    const wrong = new URL(datastoreUrl);
    wrong.password = `${password}-wrong`;
    await run(["check"], { MATCHING_DATASTORE_URL: wrong.toString() });
    for (const port of [conductorPort, outboxPort]) {
      for (const path of ["/metrics", "/readyz", "/healthz"]) {
        for (const accept of ["application/json", "text/plain"]) {
          const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { accept } });
          outputs.push(`GET ${port}${path} (${accept})\n${await response.text()}`);
        }
      }
    }
  } finally {
    conductor.child.kill("SIGTERM");
    outbox.child.kill("SIGTERM");
    await Promise.all([conductor.child.exited, outbox.child.exited]);
    outputs.push(conductor.log(), outbox.log());
  }
  const all = outputs.join("\n");
  expect(all).toContain("matching_commands_processed_total"); // the outputs were read
  expect(all).toContain(`${user}:***@`);
  for (const secret of [password, token]) {
    const at = all.indexOf(secret.slice(0, 12));
    expect(at < 0 ? "" : all.slice(Math.max(0, at - 200), at + 100)).toBe("");
  }
}, 180_000);
