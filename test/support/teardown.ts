// Preloaded by bun test (bunfig.toml): after the last test file, stops the private stack that
// test/support/stack.ts started when the environment named none, then removes the temp
// directories the tests made.
import { afterAll } from "bun:test";
import { stopPrivateStack } from "./stack";
import { removeTempDirs } from "./temp-dir";

afterAll(async () => {
  try {
    await stopPrivateStack();
  } finally {
    removeTempDirs();
  }
});
