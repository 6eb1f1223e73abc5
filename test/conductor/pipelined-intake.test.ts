/**
 * A command that arrives while the oldest batch waits for its durability is committed at
 * once, in the pipeline's second place, rather than after that wait: with the replica paused
 * (SIGSTOP, a private pair) the first command's batch cannot become durable, and the second
 * command's result is in Valkey all the same; both are acknowledged, in order, once the
 * replica resumes. Two commands first, with the replica running, claim the partition: the
 * claim is durable before the conductor commits anything.
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
        4,
        rig.replyQueue,
      );
      // The first delivery claims ownership, and the claim is made durable before any batch:
      // two commands with the replica running get the claim out of the way.
      await publish(0, 2);
      await eventually("the warm-up commands replied", () => replies.size === 2, 30_000);
      replies.clear();
      rig.pauseReplica();
      await publish(2, 3);
      await eventually(
        "the first command committed",
        async () => (await store.storedResults([commands[2]!.commandId])).size === 1,
      );
      await publish(3, 4);
      await eventually(
        "the second command committed while the first waits for its durability",
        async () => (await store.storedResults([commands[3]!.commandId])).size === 1,
        10_000,
      );
      expect(replies.size).toBe(0);
      rig.resumeReplica();
      await eventually("both replied", () => replies.size === 2, 30_000);
      expect(replies.get(commands[2]!.commandId)).toMatchObject({
        status: "accepted",
        codeName: "rested",
      });
      expect(replies.get(commands[3]!.commandId)).toMatchObject({
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
