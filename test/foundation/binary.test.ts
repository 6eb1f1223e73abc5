/**
 * The compiled ./matchd (built by the test command): it runs stand-alone, reads no
 * `.env` or `bunfig.toml` from the directory it is started in, and keeps real function
 * names in stack traces (no minification).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runToEnd } from "../support/run-to-end";
import { tempDir } from "../support/temp-dir";

const binary = join(import.meta.dir, "../../matchd");

describe("compiled matchd", () => {
  test("the test command built it", () => {
    expect(existsSync(binary)).toBe(true);
  });

  test("ignores .env and bunfig.toml in its working directory", async () => {
    const dir = tempDir("matchd-cwd-");
    // Either file, if read, would make the configuration invalid (exit 2) or break startup.
    writeFileSync(
      join(dir, ".env"),
      "MATCHING_PARTITION=not-a-number\nMATCHING_DURABILITY=bogus\n",
    );
    writeFileSync(join(dir, "bunfig.toml"), 'preload = ["./does-not-exist.ts"]\n');
    const env = { ...process.env };
    delete env.MATCHING_PARTITION;
    delete env.MATCHING_DURABILITY;
    const { stdout, stderr, code } = await runToEnd(
      [
        binary,
        "check",
        "--datastore-url",
        "redis://127.0.0.1:1",
        "--broker-url",
        "amqp://127.0.0.1:1",
      ],
      { cwd: dir, env },
    );
    // A valid config against unreachable servers: the checks fail (3), the config does not (2).
    expect({ code, stderr }).toEqual({ code: 3, stderr: "" });
    expect(stdout).toContain("FAIL datastore reachable");
  });

  test("keeps real function names (not minified)", () => {
    const contents = readFileSync(binary).toString("latin1");
    expect(contents).toContain("awaitDurabilityPolicy");
    expect(contents).toContain("commitBatch");
  });
});
