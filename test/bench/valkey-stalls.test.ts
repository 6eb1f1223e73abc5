/**
 * The soak's stall watch against a real Valkey: a DEBUG SLEEP that holds the main thread 30 ms
 * is read back once as a `command` stall of at least that long, timed on the load's clock.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { StallWatch } from "../../bench/valkey-stalls";
import { createValkey, type Valkey } from "../../src/infra/valkey/client";
import { type RunningValkey, startValkey } from "../../src/stack/index";
import { tempDir } from "../support/temp-dir";

describe("valkey stall watch", () => {
  let server: RunningValkey;
  let valkey: Valkey;
  beforeAll(async () => {
    server = await startValkey({
      dir: join(tempDir("stalls"), "valkey"),
      appendonly: false,
      extraArgs: ["enable-debug-command local"],
    });
    valkey = createValkey(`redis://127.0.0.1:${server.port}`, { name: "stall-test" });
  });
  afterAll(async () => {
    valkey.disconnect();
    await server.stop();
  });

  test("a 30 ms DEBUG SLEEP is one command stall, read once", async () => {
    const watch = new StallWatch({ primary: valkey });
    expect(await watch.read(0)).toEqual([]);
    await valkey.call("DEBUG", "SLEEP", "0.03");
    const stalls = await watch.read(10);
    const command = stalls.filter((s) => s.event === "command");
    expect(command).toHaveLength(1);
    expect(command[0]!.server).toBe("primary");
    expect(command[0]!.ms).toBeGreaterThanOrEqual(30);
    // Recorded within the last few seconds of the load's clock.
    expect(command[0]!.t).toBeGreaterThan(7);
    expect(command[0]!.t).toBeLessThanOrEqual(10.5);
    expect((await watch.read(11)).filter((s) => s.event === "command")).toEqual([]);
  });
});
