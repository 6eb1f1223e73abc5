/**
 * The allocator setting services start with: added where the environment is silent, never
 * over an operator's own value, and named in the boot log either way.
 */
import { expect, test } from "bun:test";
import { allocatorSetting, withAllocatorEnv } from "../../src/infra/allocator-env";

test("the purge delay is added, unless the environment already sets one", () => {
  expect(withAllocatorEnv({ A: "1" })).toEqual({ A: "1", MIMALLOC_PURGE_DELAY: "-1" });
  expect(withAllocatorEnv({ MIMALLOC_PURGE_DELAY: "10" }).MIMALLOC_PURGE_DELAY).toBe("10");
});

test("the boot log says which setting the process runs with", () => {
  expect(allocatorSetting({})).toBe("MIMALLOC_PURGE_DELAY unset (10 ms)");
  expect(allocatorSetting({ MIMALLOC_PURGE_DELAY: "-1" })).toBe("MIMALLOC_PURGE_DELAY=-1");
});
