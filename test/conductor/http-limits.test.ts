/**
 * The conductor's limit on requests at once: with the replica paused (a private pair) every
 * stored-result query waits to show its result durable, so 64 are in flight; the 65th is
 * refused with 503 at once, the probes still answer, and the 64 complete once it resumes.
 */
import { expect, test } from "bun:test";
import { stackStartTimeoutMs } from "../support/stack";
import { alternatingRpcCommands, eventually, openPrivatePairRig, startConductor } from "./helpers";

test(
  "past 64 requests at once the next is refused with 503, while the probes still answer",
  async () => {
    const rig = await openPrivatePairRig("matchd-http-limit-");
    try {
      const conductor = await startConductor(rig.stack, rig.partition, {
        datastoreUrl: rig.pair.primary.url,
        extraArgs: ["--durability-timeout-ms", "30000"],
      });
      const { commands, publish } = alternatingRpcCommands(
        rig.publisher,
        rig.partition,
        62,
        1,
        rig.replyQueue,
      );
      await publish(0, 1);
      await eventually("the command replied", () => rig.replies.size === 1);
      // With the replica paused, a stored result cannot be shown durable: each query waits.
      rig.pauseReplica();
      const url = `${conductor.url}/commands/${commands[0]!.commandId}`;
      const waiting = Array.from({ length: 64 }, () => fetch(url).then((r) => r.status));
      await Bun.sleep(1000);
      const refused = await fetch(url);
      expect(refused.status).toBe(503);
      expect(await refused.json()).toEqual({ error: "too many concurrent requests" });
      expect((await fetch(`${conductor.url}/healthz`)).status).toBe(200);
      rig.resumeReplica();
      expect(await Promise.all(waiting)).toEqual(new Array(64).fill(200));
      expect((await fetch(url)).status).toBe(200);
      expect(await conductor.stop()).toBe(0);
    } finally {
      await rig.close();
    }
  },
  stackStartTimeoutMs,
);
