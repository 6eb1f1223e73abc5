// `stack up --cluster`: a Valkey Cluster of three primaries with a replica each beside the
// broker, its seeds in one redis+cluster:// URL; `stack down` stops every node it started.

import { expect, test } from "bun:test";
import Redis from "ioredis";
import { parseDatastoreAddress } from "../../src/infra/valkey/address";
import { stackDown, stackUp } from "../../src/stack/index";
import { isRunning } from "../../src/stack/process";
import { tempDir } from "../support/temp-dir";

test("stack up --cluster starts a formed cluster of 3 primaries and 3 replicas", async () => {
  const dir = tempDir("stack-cluster");
  const info = await stackUp({ dir, cluster: true });
  try {
    const address = parseDatastoreAddress(info.datastoreUrl);
    expect(typeof address === "object" && address.kind).toBe("cluster");
    if (typeof address !== "object" || address.kind !== "cluster") return;
    expect(address.seeds).toHaveLength(6);
    const redis = new Redis({ ...address.seeds[0]!, lazyConnect: true });
    await redis.connect();
    try {
      expect(String(await redis.call("CLUSTER", "INFO"))).toContain("cluster_state:ok");
      const ranges = (await redis.call("CLUSTER", "SLOTS")) as unknown[][];
      // Three primaries, each serving its slots with one replica beside it.
      expect(ranges).toHaveLength(3);
      for (const range of ranges) expect(range).toHaveLength(4);
    } finally {
      redis.disconnect();
    }
    await expect(stackUp({ dir })).rejects.toThrow("--cluster runs in");
  } finally {
    await stackDown({ dir });
  }
  for (const pid of Object.values(info.pids)) expect(isRunning(pid)).toBe(false);
}, 60_000);
