/**
 * The conductor's HTTP surface: it binds loopback unless told otherwise; with a token the
 * private queries (orders, command results) need it, compared in full, while probes, metrics,
 * books and the digest stay open; oversized URLs and headers are refused; a token is never
 * shown, in logs or in the configuration's problem list.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { runToEnd } from "../support/run-to-end";
import { matchdCommand, uniquePartition } from "../support/stack";
import { conductorSuite, disposeAll, startConductor } from "./helpers";

const suite = conductorSuite();
const token = "s3cret-token-for-the-http-test-only";
afterAll(disposeAll);

/** Local addresses a process's port listens on, from /proc/net/tcp and tcp6. */
function listeningAddresses(port: number): string[] {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  const found: string[] = [];
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state === "0A" && local?.endsWith(`:${hex}`)) found.push(local.split(":")[0]!);
    }
  }
  return found;
}

test("HTTP binds loopback by default, and MATCHING_HTTP_HOST widens it", async () => {
  const local = await startConductor(suite.stack, uniquePartition());
  expect(listeningAddresses(local.port)).toEqual(["0100007F"]); // 127.0.0.1
  await local.stop();
  const wide = await startConductor(suite.stack, uniquePartition(), {
    env: { MATCHING_HTTP_HOST: "0.0.0.0" },
  });
  expect(listeningAddresses(wide.port)).toEqual(["00000000"]);
  await wide.stop();
}, 60_000);

test("with a token the private queries need it; market data and probes stay open", async () => {
  const conductor = await startConductor(suite.stack, uniquePartition(), {
    env: { MATCHING_HTTP_TOKEN: token },
  });
  const get = (path: string, authorization?: string) =>
    fetch(`${conductor.url}${path}`, {
      headers: authorization === undefined ? {} : { authorization },
    }).then((r) => r.status);
  for (const path of ["/orders/x", "/commands/x", "/trace"]) {
    expect(await get(path)).toBe(401);
    expect(await get(path, `Bearer ${token.slice(0, -1)}`)).toBe(401);
    expect(await get(path, `Bearer ${token}x`)).toBe(401);
    expect(await get(path, token)).toBe(401);
    expect(await get(path, `Bearer ${token}`)).toBe(path === "/trace" ? 200 : 404);
  }
  for (const path of ["/healthz", "/readyz", "/metrics", "/books/1", "/digest"]) {
    expect(await get(path)).toBe(200);
  }
  // The client sends the token it is given, and names a missing one.
  const client = (env: Record<string, string>) =>
    runToEnd([...matchdCommand, "result", "x", "--conductor-url", conductor.url], {
      env: { PATH: process.env.PATH, ...env },
      killAfterMs: 20_000,
    });
  const without = await client({});
  expect(without.code).toBe(1);
  expect(without.stderr).toContain("requires its token: set MATCHING_HTTP_TOKEN");
  const withToken = await client({ MATCHING_HTTP_TOKEN: token });
  expect(withToken.stderr).toContain("no stored result for command x");
  // The 404 names the dedup window its result may have expired in.
  const missing = await fetch(`${conductor.url}/commands/x`, {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(missing.status).toBe(404);
  expect(await missing.json()).toMatchObject({ dedupWindowSeconds: 3600 });
  await conductor.stop();
  // The boot log states what the dedup window costs at the expected rate.
  expect(conductor.log()).toContain("dedup window fits in memory: the 3600 s dedup window at 2000");
  expect(conductor.log()).not.toContain(token);
  expect(conductor.log()).toContain('"httpToken":"***"');
}, 60_000);

test("oversized URLs and headers are refused", async () => {
  const conductor = await startConductor(suite.stack, uniquePartition());
  const long = await fetch(`${conductor.url}/orders/${"x".repeat(3000)}`);
  expect(long.status).toBe(414);
  const big = { headers: { "x-big": "y".repeat(9000) } };
  expect((await fetch(`${conductor.url}/metrics`, big)).status).toBe(431);
  expect((await fetch(`${conductor.url}/metrics`)).status).toBe(200);
  // The probes stand before the limits: an orchestrator always gets its answer.
  expect((await fetch(`${conductor.url}/healthz`, big)).status).toBe(200);
  await conductor.stop();
}, 60_000);

test("a bad token is refused without being echoed", async () => {
  const bad = await runToEnd([...matchdCommand, "conductor", "--http-token", "short secret"], {
    env: { PATH: process.env.PATH },
    killAfterMs: 20_000,
  });
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain("MATCHING_HTTP_TOKEN (--http-token): got (hidden)");
  expect(bad.stderr).not.toContain("short secret");
});
