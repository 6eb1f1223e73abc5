/**
 * A command that arrives while the oldest batch waits for its durability is committed at
 * once, in the pipeline's second place, rather than after that wait: with the replica paused
 * (SIGSTOP, a private pair) the first command's batch cannot become durable, and the second
 * command's result is in Valkey all the same; both are acknowledged, in order, once the
 * replica resumes.
 */
import { expect, test } from "bun:test";
import { stackStartTimeoutMs } from "../support/stack";
import {
  alternatingRpcCommands,
  eventually,
  openPrivatePairRig,
  PartitionStore,
  startConductor,
} from "./helpers";

test(
  "a command arriving during the oldest batch's durability wait is committed during it",
  async () => {
    const rig = await openPrivatePairRig("matchd-pipelined-intake-");
    const store = new PartitionStore(rig.pair.primary.url, rig.partition);
    const { replies } = rig;
    try {
      const conductor = await startConductor(rig.stack, rig.partition, {
        datastoreUrl: rig.pair.primary.url,
        extraArgs: ["--durability-timeout-ms", "60000"],
      });
      const { commands, publish } = alternatingRpcCommands(
        rig.publisher,
        rig.partition,
        61,
        2,
        rig.replyQueue,
      );
      rig.pauseReplica();
      await publish(0, 1);
      await eventually(
        "the first command committed",
        async () => (await store.storedResults([commands[0]!.commandId])).size === 1,
      );
      await publish(1, 2);
      await eventually(
        "the second command committed while the first waits for its durability",
        async () => (await store.storedResults([commands[1]!.commandId])).size === 1,
        10_000,
      );
      expect(replies.size).toBe(0);
      rig.resumeReplica();
      await eventually("both replied", () => replies.size === 2, 30_000);
      expect(replies.get(commands[0]!.commandId)).toMatchObject({
        status: "accepted",
        codeName: "rested",
      });
      expect(replies.get(commands[1]!.commandId)).toMatchObject({
        status: "accepted",
        codeName: "filled",
      });
      expect(await conductor.stop()).toBe(0);
    } finally {
      store.close();
      await rig.close();
    }
  },
  stackStartTimeoutMs,
);
