/**
 * What a person sees when a service's broker is wrong: refused credentials or a missing
 * vhost end the conductor's and the outbox's boot with exit 5 and one line; an unreachable
 * broker is retried, one log line a try and no stack trace; a dead letter is a warning that
 * names its reason; a misspelt flag gets a did-you-mean and --help shows the defaults.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { freePorts } from "../../src/stack/process";
import { disposeAll, eventually, Publisher, startConductor } from "../conductor/helpers";
import { runToEnd } from "../support/run-to-end";
import {
  matchdCommand,
  spawnMatchd,
  stackStartTimeoutMs,
  type TestStack,
  testStack,
  uniquePartition,
} from "../support/stack";

let stack: TestStack;

beforeAll(async () => {
  stack = await testStack();
}, stackStartTimeoutMs);
afterAll(disposeAll);

/** Runs a service on the test stack's datastore with `brokerUrl`; returns its exit and log. */
async function serviceWithBroker(service: "conductor" | "outbox", brokerUrl: string) {
  const [port] = await freePorts(1);
  const { child, log } = spawnMatchd(
    [service, "--partition", String(uniquePartition()), "--http-port", String(port)],
    {
      MATCHING_DATASTORE_URL: stack.datastoreUrl,
      MATCHING_BROKER_URL: brokerUrl,
      MATCHING_PARTITION_COUNT: "1024",
    },
  );
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const code = await child.exited;
  clearTimeout(timer);
  return { code, log: log() };
}

function withPassword(url: string, password: string): string {
  const parsed = new URL(url);
  parsed.password = password;
  return parsed.toString();
}

function withVhost(url: string, vhost: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${vhost}`;
  return parsed.toString();
}

describe("service errors a person understands", () => {
  test("refused credentials and a missing vhost end the boot with exit 5", async () => {
    const conductor = await serviceWithBroker("conductor", withPassword(stack.brokerUrl, "nope"));
    expect(conductor.code).toBe(5);
    expect(conductor.log).toMatch(/matchd: the broker at .+ refused the credentials of user guest/);
    expect(conductor.log).not.toContain("broker not reachable");
    const outbox = await serviceWithBroker("outbox", withVhost(stack.brokerUrl, "no-such-vhost"));
    expect(outbox.code).toBe(5);
    expect(outbox.log).toContain('refused vhost "no-such-vhost": it does not exist');
  }, 60_000);

  test("an unreachable broker is retried, one line a try, no stack trace", async () => {
    const [closed] = await freePorts(1);
    for (const [service, logged] of [
      ["conductor", "broker not reachable"],
      ["outbox", "cannot open the broker channel"],
    ] as const) {
      const [port] = await freePorts(1);
      const { child, log } = spawnMatchd(
        [service, "--partition", String(uniquePartition()), "--http-port", String(port)],
        {
          MATCHING_DATASTORE_URL: stack.datastoreUrl,
          MATCHING_BROKER_URL: `amqp://guest:guest@127.0.0.1:${closed}/matchd`,
          MATCHING_PARTITION_COUNT: "1024",
        },
      );
      try {
        const retries = () =>
          log()
            .split("\n")
            .filter((line) => line.includes(logged));
        await eventually(`${service}: two retries logged`, () => retries().length >= 2, 20_000);
        for (const line of retries()) {
          expect(JSON.parse(line)).toMatchObject({
            level: "warn",
            error: `connect ECONNREFUSED 127.0.0.1:${closed}`,
          });
          expect(line).not.toContain("stack");
        }
      } finally {
        child.kill("SIGTERM");
        await child.exited;
      }
    }
  }, 60_000);

  test("a dead-lettered command is logged at warn with its reason", async () => {
    const partition = uniquePartition();
    const conductor = await startConductor(stack, partition);
    const publisher = await Publisher.open(stack.brokerUrl);
    try {
      await publisher.publish(partition, ["{not json"], { messageId: "unreadable-1" });
      await eventually("the dead letter logged", () =>
        conductor.log().includes("command dead-lettered"),
      );
      const line = conductor
        .log()
        .split("\n")
        .find((l) => l.includes("command dead-lettered"))!;
      expect(JSON.parse(line)).toMatchObject({
        level: "warn",
        queue: "matching:commands.dead-letter",
        messageId: "unreadable-1",
      });
      expect(JSON.parse(line).reason).toMatch(/json/i);
    } finally {
      await publisher.close();
      await conductor.stop();
    }
  }, 60_000);

  test("a misspelt flag or command gets a did-you-mean; --help shows defaults", async () => {
    const run = (args: string[]) =>
      runToEnd([...matchdCommand, ...args], {
        env: { PATH: process.env.PATH },
        killAfterMs: 20_000,
      });
    const flag = await run(["conductor", "--partiton", "1"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("unknown flag --partiton (did you mean --partition?)");
    const command = await run(["condutor"]);
    expect(command.code).toBe(2);
    expect(command.stderr).toContain("unknown command condutor (did you mean conductor?)");
    const far = await run(["outbox", "--x"]);
    expect(far.stderr).toContain("unknown flag --x\n");
    const help = await run(["conductor", "--help"]);
    expect(help.stdout).toMatch(/--batch-max .+ \[default 500\]/);
    expect(help.stdout).toMatch(/--http-port .+ \[default 3002\]/);
    const outboxHelp = await run(["outbox", "--help"]);
    expect(outboxHelp.stdout).toMatch(/--http-port .+ \[default 3035\]/);
  }, 60_000);
});
