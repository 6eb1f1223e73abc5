/** The redis+sentinel:// datastore URL: parsed, validated with the rest of the config, redacted. */
import { describe, expect, test } from "bun:test";
import { describeConfig, resolveConfig } from "../../src/config/resolve";
import { parseDatastoreAddress } from "../../src/infra/valkey/address";
import type { ListedReplica } from "../../src/infra/valkey/fsync-policy";
import { replicaLagLimitS, requiredReplicaFsyncs } from "../../src/infra/valkey/replica-rule";

describe("parseDatastoreAddress", () => {
  test("a Sentinel URL gives every sentinel, the master name and the data nodes' credentials", () => {
    expect(
      parseDatastoreAddress("redis+sentinel://app:p%40ss@10.0.0.1:26379,sentinel-b,[::1]:5/mkt"),
    ).toEqual({
      kind: "sentinel",
      sentinels: [
        { host: "10.0.0.1", port: 26379 },
        { host: "sentinel-b", port: 26379 },
        { host: "::1", port: 5 },
      ],
      masterName: "mkt",
      username: "app",
      password: "p@ss",
    });
    expect(parseDatastoreAddress("redis+sentinel://:secret@h:1/m")).toMatchObject({
      password: "secret",
    });
    expect(parseDatastoreAddress("redis://127.0.0.1:6379")).toEqual({
      kind: "direct",
      url: "redis://127.0.0.1:6379",
    });
  });

  test("a malformed Sentinel URL says what is wrong", () => {
    expect(parseDatastoreAddress("redis+sentinel://h:1")).toContain("master-name");
    expect(parseDatastoreAddress("redis+sentinel://h:99999/m")).toBe('"h:99999" is not host:port');
    expect(parseDatastoreAddress("redis+sentinel://h:1,,h:2/m")).toBe('"" is not host:port');
    expect(parseDatastoreAddress("redis+sentinel://u:%zz@h:1/m")).toContain("%-escape");
  });
});

describe("the config", () => {
  test("takes a Sentinel URL and the Sentinels' password, and hides both secrets", () => {
    const result = resolveConfig(
      {
        MATCHING_DATASTORE_URL: "redis+sentinel://u:datapass@127.0.0.1:26379/matchd",
        MATCHING_SENTINEL_PASSWORD: "sentinelpass",
      },
      new Map(),
      "conductor",
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const shown = JSON.stringify(describeConfig(result.config));
    expect(shown).not.toContain("datapass");
    expect(shown).not.toContain("sentinelpass");
    expect(shown).toContain("127.0.0.1:26379/matchd");
  });

  test("refuses a bad Sentinel URL with the accepted form, without echoing its password", () => {
    const result = resolveConfig(
      { MATCHING_DATASTORE_URL: "redis+sentinel://u:datapass@h:0/m" },
      new Map(),
      "conductor",
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.problems.join("\n");
    expect(text).toContain(
      "redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>",
    );
    expect(text).not.toContain("datapass");
  });
});

describe("the replica rule", () => {
  const replica = (state: string, lag: number): ListedReplica => ({
    ip: "127.0.0.1",
    port: 1,
    state,
    lag,
  });

  test("a wait needs every online replica acknowledging within the limit, and at least one", () => {
    expect(requiredReplicaFsyncs([replica("online", 0), replica("online", 1)], 2)).toBe(2);
    expect(requiredReplicaFsyncs([replica("online", 0), replica("online", 3)], 2)).toBe(1);
    expect(requiredReplicaFsyncs([replica("online", 0), replica("wait_bgsave", 0)], 2)).toBe(1);
    expect(requiredReplicaFsyncs([], 2)).toBe(1);
  });

  test("the lag limit outlasts Sentinel's down-after period", () => {
    expect(replicaLagLimitS(undefined)).toBe(2);
    expect(replicaLagLimitS(1000)).toBe(2);
    expect(replicaLagLimitS(5000)).toBe(6);
    expect(replicaLagLimitS(30_000)).toBe(31);
  });
});

test("a redis+cluster:// URL names seed nodes, with the data nodes' credentials", () => {
  expect(parseDatastoreAddress("redis+cluster://u%40x:p%3A1@127.0.0.1:7000,[::1]:7001,h/")).toEqual(
    {
      kind: "cluster",
      seeds: [
        { host: "127.0.0.1", port: 7000 },
        { host: "::1", port: 7001 },
        { host: "h", port: 6379 },
      ],
      username: "u@x",
      password: "p:1",
    },
  );
  expect(parseDatastoreAddress("redis+cluster://127.0.0.1:7000")).toBe(
    "not redis+cluster://[user:password@]host:port[,host:port...]/",
  );
  expect(parseDatastoreAddress("redis+cluster://127.0.0.1:99999/")).toBe(
    '"127.0.0.1:99999" is not host:port',
  );
  expect(parseDatastoreAddress("redis+cluster://%zz@127.0.0.1:7000/")).toBe(
    "the credentials hold a malformed %-escape",
  );
});
