// The conductor's command topology against the real broker: a partition queue that already
// exists with other arguments is used as it is (a refused redeclaration must not crash).

import { expect, test } from "bun:test";
import amqp from "amqplib";
import {
  commandExchange,
  commandQueue,
  declareCommandTopology,
} from "../../src/infra/amqp/topology";
import { createLogger } from "../../src/infra/log";
import { testStack, uniquePartition } from "../support/stack";

test("a command queue declared earlier as a classic queue is used as it is, and bound", async () => {
  const { brokerUrl } = await testStack();
  const partition = uniquePartition();
  const queue = commandQueue(partition);
  const connection = await amqp.connect(brokerUrl);
  const lines: string[] = [];
  try {
    const setup = await connection.createChannel();
    await setup.assertQueue(queue, { durable: true });
    // The quorum declaration is refused with a 406, which closes its channel with an 'error'.
    await declareCommandTopology(
      connection,
      partition,
      createLogger("info", {}, (line) => lines.push(line)),
    );
    expect(lines.some((line) => line.includes("exists with other arguments"))).toBe(true);
    const publisher = await connection.createConfirmChannel();
    publisher.publish(commandExchange, queue, Buffer.from("{}"));
    await publisher.waitForConfirms();
    expect((await setup.checkQueue(queue)).messageCount).toBe(1);
    await setup.deleteQueue(queue);
  } finally {
    await connection.close().catch(() => undefined);
  }
}, 30_000);

test("a vhost that refuses the producers' declaration (only single active consumer) is named at boot", async () => {
  const { brokerUrl } = await testStack();
  const defaultVhost = new URL(brokerUrl);
  defaultVhost.pathname = "/%2F";
  const warnings = async (url: string): Promise<string[]> => {
    const partition = uniquePartition();
    const connection = await amqp.connect(url);
    const lines: string[] = [];
    try {
      await declareCommandTopology(
        connection,
        partition,
        createLogger("info", {}, (line) => lines.push(line)),
      );
      const cleanup = await connection.createChannel();
      await cleanup.deleteQueue(commandQueue(partition));
      await cleanup.close();
    } finally {
      await connection.close().catch(() => undefined);
    }
    return lines.filter((line) => line.includes("--default-queue-type quorum"));
  };
  // The stack's vhost is created with --default-queue-type quorum; the default vhost is not.
  expect(await warnings(brokerUrl)).toEqual([]);
  expect((await warnings(defaultVhost.toString())).length).toBe(1);
}, 30_000);
