/**
 * `pair.halt` and `pair.resume` are executed only from a broker user in
 * MATCHING_OPERATOR_USERS, named by the message's AMQP user-id, which the broker itself checks
 * against the publishing connection's user: a user not listed, or no user-id, gets
 * not-authorised (a stored result, an event, a reply, like any reject), and a forged user-id
 * never reaches the queue.
 */
import { describe, expect, test } from "bun:test";
import amqp, { type ChannelModel } from "amqplib";
import { brokerUser } from "../../src/cli/client/rpc";
import { commandExchange, commandQueue } from "../../src/infra/amqp/topology";
import { uniquePartition } from "../support/stack";
import {
  conductorSuite,
  eventually,
  openReplies,
  PartitionStore,
  removePartition,
  startConductor,
} from "./helpers";
import { OrderCommands } from "./order-commands";

const suite = conductorSuite();

describe("pair commands and MATCHING_OPERATOR_USERS", () => {
  test("a halt from a user not listed is not-authorised; from a listed user it halts the pair", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    const rpc: ChannelModel = await amqp.connect(suite.stack.brokerUrl);
    const { queue, replies, close } = await openReplies(rpc);
    const user = brokerUser(suite.stack.brokerUrl);
    const b = new OrderCommands(partition);
    const send = (command: ReturnType<OrderCommands["halt"]>, userId?: string) =>
      suite.publisher.publish(partition, [command], {
        replyTo: queue,
        correlationId: command.commandId,
        ...(userId === undefined ? {} : { userId }),
      });
    const reply = async (commandId: string) => {
      await eventually(`the reply to ${commandId}`, () => replies.has(commandId));
      return replies.get(commandId)!;
    };
    const book = async (url: string) =>
      (await (await fetch(`${url}/books/${b.pairId}`)).json()) as Record<string, unknown>;
    try {
      await suite.publisher.declare(partition);
      // The broker user is a real one, only not listed.
      const strict = await startConductor(suite.stack, partition, {
        env: { MATCHING_OPERATOR_USERS: "ops, auditor" },
      });
      const byGuest = b.halt("by a user not listed");
      const anonymous = b.halt("with no user-id");
      await send(byGuest, user);
      await send(anonymous);
      const refusal = {
        status: "rejected",
        code: 308,
        codeName: "not-authorised",
        reason: "pair commands need a broker user listed in MATCHING_OPERATOR_USERS",
        events: 1,
      };
      expect(await reply(byGuest.commandId)).toMatchObject(refusal);
      expect(await reply(anonymous.commandId)).toMatchObject(refusal);
      expect((await store.storedResults([byGuest.commandId])).get(byGuest.commandId)).toEqual(
        await reply(byGuest.commandId),
      );
      const events = (await store.events()).map(({ event }) => event);
      expect(events.map((event) => event.type)).toEqual(["order.rejected.v1", "order.rejected.v1"]);
      expect(events[0]).toMatchObject({
        commandId: byGuest.commandId,
        pairId: b.pairId,
        payload: { commandType: "pair.halt", code: 308, codeName: "not-authorised" },
      });
      expect(await book(strict.url)).toMatchObject({ halted: false });
      expect(await store.valkey.exists(store.keys.haltedPairs)).toBe(0);
      expect(await strict.stop()).toBe(0);

      const listed = await startConductor(suite.stack, partition, {
        env: { MATCHING_OPERATOR_USERS: `ops,${user}` },
      });
      // A redelivery keeps its stored answer, whoever is listed now.
      replies.delete(byGuest.commandId);
      await send(byGuest, user);
      expect(await reply(byGuest.commandId)).toMatchObject(refusal);
      const halt = b.halt("maintenance");
      await send(halt, user);
      expect(await reply(halt.commandId)).toMatchObject({ status: "accepted", code: 0 });
      expect(await book(listed.url)).toMatchObject({ halted: true, haltReason: "maintenance" });
      expect(await store.valkey.hgetall(store.keys.haltedPairs)).toEqual({
        [String(b.pairId)]: "maintenance",
      });
      const place = b.place("p1", "bid", "100", "1");
      await suite.publisher.publish(partition, [place], {
        replyTo: queue,
        correlationId: place.commandId,
      });
      expect(await reply(place.commandId)).toMatchObject({ code: 304, codeName: "pair-halted" });
      // Listed or not, resuming is the same kind of command.
      const strayResume = b.resume("from nobody");
      await send(strayResume);
      expect(await reply(strayResume.commandId)).toMatchObject(refusal);
      const resume = b.resume("maintenance over");
      await send(resume, user);
      expect(await reply(resume.commandId)).toMatchObject({ status: "accepted", code: 0 });
      expect(await book(listed.url)).toMatchObject({ halted: false });
      const types = (await store.events()).map(({ event }) => event.type);
      expect(types.slice(2)).toEqual([
        "pair.halted.v1",
        "order.rejected.v1",
        "order.rejected.v1",
        "pair.resumed.v1",
      ]);
      expect(await listed.stop()).toBe(0);
    } finally {
      await close();
      await rpc.close().catch(() => undefined);
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);

  test("a user-id that is not the connection's own user is refused by the broker", async () => {
    const partition = uniquePartition();
    const store = new PartitionStore(suite.stack.datastoreUrl, partition);
    const connection = await amqp.connect(suite.stack.brokerUrl);
    connection.on("error", () => undefined);
    try {
      await suite.publisher.declare(partition);
      await startConductor(suite.stack, partition, { env: { MATCHING_OPERATOR_USERS: "ops" } });
      const channel = await connection.createConfirmChannel();
      let closedWith = "";
      channel.on("error", (error: Error) => {
        closedWith = error.message;
      });
      const forged = new OrderCommands(partition).halt("forged");
      const confirmed = new Promise<Error | null>((resolve) =>
        channel.publish(
          commandExchange,
          commandQueue(partition),
          Buffer.from(JSON.stringify(forged)),
          { persistent: true, userId: "ops" },
          (error) => resolve(error ?? null),
        ),
      );
      expect(await confirmed).not.toBeNull();
      await eventually("the channel closed", () => closedWith !== "");
      expect(closedWith).toContain("PRECONDITION_FAILED");
      expect(closedWith).toContain("user_id property set to 'ops'");
      // Nothing reached the conductor: no result, no event.
      await Bun.sleep(500);
      expect(await store.storedResults([forged.commandId])).toEqual(new Map());
      expect(await store.eventCount()).toBe(0);
      expect(await suite.publisher.messageCount(partition)).toBe(0);
    } finally {
      await connection.close().catch(() => undefined);
      await removePartition(store, suite.publisher, partition);
    }
  }, 60_000);
});
