// Preloaded by bun test (bunfig.toml): after the last test file, stops the private stack that
// test/support/stack.ts started when the environment named none, then removes the temp
// directories the tests made.
import { afterAll, setDefaultTimeout } from "bun:test";
import { stopPrivateStack } from "./stack";
import { removeTempDirs } from "./temp-dir";

// bun ignores bunfig's test timeout (it takes --timeout, as scripts/test.sh passes): tests
// and hooks that start servers need more than its 5 s default when a file is run on its own
// (a private stack stopped mid-start failed every test of its file). Set here, in the
// preload, it holds for every file.
setDefaultTimeout(60_000);

// Stopping RabbitMQ can take longer than a minute's share of a busy machine: its own bound.
afterAll(async () => {
  try {
    await stopPrivateStack();
  } finally {
    removeTempDirs();
  }
}, 60_000);
