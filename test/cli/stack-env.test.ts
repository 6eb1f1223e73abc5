/**
 * `matchd stack up` as a person uses it: D/env exports its variables when sourced (bash and
 * dash), Docker's --env-file reads the same file, the tap queue takes every event exchange's
 * events (so none is unroutable) within its bound, and the next commands are printed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import amqp from "amqplib";
import { allEventExchanges } from "../../src/infra/amqp/topology";
import { findBinary } from "../../src/stack/process";
import { tapMaxMessages, tapQueue } from "../../src/stack/tap";
import { runToEnd } from "../support/run-to-end";
import { matchdCommand, stackStartTimeoutMs } from "../support/stack";
import { tempDir } from "../support/temp-dir";

const dir = tempDir("matchd-stack-env-");
const envFile = join(dir, "env");
let up: { stdout: string; stderr: string; code: number };

const matchd = (args: string[]) =>
  runToEnd([...matchdCommand, ...args], { env: { PATH: process.env.PATH }, killAfterMs: 90_000 });

beforeAll(async () => {
  up = await matchd(["stack", "up", "--dir", dir]);
  if (up.code !== 0) throw new Error(`stack up failed:\n${up.stderr}`);
}, stackStartTimeoutMs);

afterAll(async () => {
  await matchd(["stack", "down", "--dir", dir]);
});

describe("matchd stack up, for a person", () => {
  test("sourcing D/env exports its variables to the processes a shell starts", async () => {
    const brokerUrl = /^MATCHING_BROKER_URL=(.+)$/m.exec(up.stdout)![1]!;
    for (const shell of ["bash", "sh"]) {
      const child = await runToEnd(
        [shell, "-c", `. "${envFile}" && ${shell} -c 'echo "$MATCHING_BROKER_URL"'`],
        { env: { PATH: process.env.PATH } },
      );
      expect(child.stderr).toBe("");
      expect(child.stdout).toBe(`${brokerUrl}\n`);
    }
    // allexport is switched off again: later assignments in the user's shell stay private.
    const after = await runToEnd(["bash", "-c", `. "${envFile}"; X=1; bash -c 'echo "[$X]"'`]);
    expect(after.stdout).toBe("[]\n");
  });

  test("D/env follows Docker's --env-file rules (and Docker's own parser, where installed)", async () => {
    const text = readFileSync(envFile, "utf8");
    const variables: string[] = [];
    for (const raw of text.split("\n")) {
      const line = raw.trimStart();
      if (line === "" || line.startsWith("#")) continue;
      const name = line.split("=")[0]!;
      expect(name).not.toMatch(/\s/);
      if (line.includes("=")) variables.push(name);
    }
    expect(variables).toEqual([
      "MATCHING_DATASTORE_URL",
      "MATCHING_REPLICA_URL",
      "MATCHING_BROKER_URL",
      "MIMALLOC_PURGE_DELAY",
    ]);
    if (findBinary("docker") === undefined) {
      console.log("no docker client here: Docker's own parser not run");
      return;
    }
    // The client parses --env-file before it contacts a daemon (which may not run here).
    const docker = await runToEnd(
      ["docker", "run", "--rm", "--env-file", envFile, "matchd-env-check:none"],
      {
        killAfterMs: 20_000,
      },
    );
    expect(docker.stderr).not.toContain("invalid env file");
    const bad = join(dir, "bad.env");
    await Bun.write(bad, "export A=1\n");
    const refused = await runToEnd(["docker", "run", "--rm", "--env-file", bad, "x"], {
      killAfterMs: 20_000,
    });
    expect(refused.stderr).toContain("invalid env file"); // the check above can fail
  });

  test("the tap queue takes every event exchange's events, at most its bound", async () => {
    const brokerUrl = /^MATCHING_BROKER_URL=(.+)$/m.exec(up.stdout)![1]!;
    const connection = await amqp.connect(brokerUrl);
    try {
      const channel = await connection.createConfirmChannel();
      const returned: string[] = [];
      channel.on("return", (message) => returned.push(message.fields.exchange));
      for (const exchange of allEventExchanges) {
        channel.publish(exchange, exchange, Buffer.from("{}"), { mandatory: true });
      }
      await channel.waitForConfirms();
      expect(returned).toEqual([]);
      expect((await channel.checkQueue(tapQueue)).messageCount).toBe(allEventExchanges.length);
      const overflow = tapMaxMessages + 10 - allEventExchanges.length;
      for (let i = 0; i < overflow; i++) {
        channel.publish(allEventExchanges[0]!, allEventExchanges[0]!, Buffer.from(String(i)));
      }
      await channel.waitForConfirms();
      expect((await channel.checkQueue(tapQueue)).messageCount).toBe(tapMaxMessages);
    } finally {
      await connection.close();
    }
  }, 60_000);

  test("it prints the commands to run next", () => {
    expect(up.stderr).toContain(`source ${dir}/env`);
    expect(up.stderr).toContain("./matchd conductor");
    expect(up.stderr).toContain("./matchd order place --pair 1 --side bid --price 100 --volume 1");
  });
});
