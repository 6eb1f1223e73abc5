// Preloaded by bun test (bunfig.toml): after the last test file, stops the private stack that
// test/support/stack.ts started when the environment named none, then removes the temp
// directories the tests made.
import { afterAll } from "bun:test";
import { stopPrivateStack } from "./stack";
import { removeTempDirs } from "./temp-dir";

// bun gives hooks 5 s whatever bunfig says; stopping RabbitMQ can take longer.
afterAll(async () => {
  try {
    await stopPrivateStack();
  } finally {
    removeTempDirs();
  }
}, 60_000);
