/** The collection counter sees collections that happen, and none while nothing is collected. */
import { expect, test } from "bun:test";
import { observeCollections } from "../../src/infra/gc-observer";

test("collections are observed as the heap churns, and not after stop", async () => {
  let seen = 0;
  const stop = observeCollections(() => seen++);
  let keep: unknown[] = [];
  for (let round = 0; round < 50 && seen < 3; round++) {
    for (let i = 0; i < 100_000; i++) {
      keep.push({ i, text: `x${i}` });
      if (keep.length > 10_000) keep = [];
    }
    Bun.gc(true);
    await Bun.sleep(5);
  }
  expect(seen).toBeGreaterThanOrEqual(3);
  stop();
  const atStop = seen;
  Bun.gc(true);
  await Bun.sleep(20);
  expect(seen).toBe(atStop);
});
