// The appendfsync watch's verdicts, with a stub connection standing in for the server's
// answers (the real server's part is tested with conductor and outbox on private pairs).

import { expect, test } from "bun:test";
import type { Logger } from "../../src/infra/log";
import type { Valkey } from "../../src/infra/valkey/client";
import { FsyncPolicyWatch } from "../../src/infra/valkey/policy-watch";

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;

function stubServer(): { valkey: Valkey; role: string; fsync: string; failing: boolean } {
  const server = {
    role: "master",
    fsync: "always",
    failing: false,
    valkey: undefined as unknown as Valkey,
  };
  server.valkey = {
    info: async () => {
      if (server.failing) throw new Error("Connection is closed.");
      return `# Replication\r\nrole:${server.role}\r\n`;
    },
    call: async () => {
      if (server.failing) throw new Error("Connection is closed.");
      return ["appendfsync", server.fsync];
    },
  } as unknown as Valkey;
  return server;
}

test("always on a primary holds; anything else, a replica, or two failed reads in a row do not", async () => {
  const server = stubServer();
  const watch = new FsyncPolicyWatch(server.valkey, quiet);
  await watch.check();
  expect(watch.violation()).toBeUndefined();

  server.fsync = "everysec";
  await watch.check();
  expect(watch.violation()).toContain("appendfsync is everysec");

  server.fsync = "always";
  await watch.check();
  expect(watch.violation()).toBeUndefined();

  server.role = "slave";
  await watch.check();
  expect(watch.violation()).toContain("role is slave");
  server.role = "master";
  await watch.check();

  // One failed read keeps the last answer (a reconnect); failures apart never add up, but
  // the second in a row counts.
  server.failing = true;
  await watch.check();
  expect(watch.violation()).toBeUndefined();
  server.failing = false;
  await watch.check();
  server.failing = true;
  await watch.check();
  expect(watch.violation()).toBeUndefined();
  await watch.check();
  expect(watch.violation()).toContain("unreadable");
  server.failing = false;
  await watch.check();
  expect(watch.violation()).toBeUndefined();
});
