// Preloaded by bun test (bunfig.toml): after the last test file, stops the private stack that
// test/support/stack.ts started when the environment named none.
import { afterAll } from "bun:test";
import { stopPrivateStack } from "./stack";

afterAll(stopPrivateStack);
