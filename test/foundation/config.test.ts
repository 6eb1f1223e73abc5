/** The config schema: defaults, flag precedence, and every bad value reported at once. */
import { describe, expect, test } from "bun:test";
import { resolveConfig, unknownSettingNames } from "../../src/config/resolve";

/** The problems text for one variable's value, or undefined when the config is accepted. */
function problemsFor(env: string, value: string): string | undefined {
  const result = resolveConfig({ [env]: value }, new Map(), "conductor");
  return result.ok ? undefined : result.problems.join("\n");
}

describe("resolveConfig", () => {
  test("defaults follow the contract", () => {
    const result = resolveConfig({}, new Map(), "conductor");
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.config).toMatchObject({
      datastoreUrl: "redis://127.0.0.1:6379",
      brokerUrl: "amqp://guest:guest@127.0.0.1:5672",
      partition: 0,
      partitionCount: 1,
      httpPort: 3002,
      durability: "aof-replicated",
      durabilityTimeoutMs: 2000,
    });
    const outbox = resolveConfig({}, new Map(), "outbox");
    expect(outbox.ok && outbox.config.httpPort).toBe(3035);
  });

  test("flags override the environment", () => {
    const result = resolveConfig(
      { MATCHING_PARTITION: "1", MATCHING_PARTITION_COUNT: "4" },
      new Map([["--partition", "3"]]),
      "conductor",
    );
    expect(result.ok && result.config.partition).toBe(3);
  });

  test("the dedup window: an hour by default, a minute at least (shorter is warned about at boot)", () => {
    const short = resolveConfig({ MATCHING_DEDUP_RETENTION_S: "59" }, new Map(), "conductor");
    expect(short.ok).toBe(false);
    if (!short.ok) expect(short.problems.join("\n")).toContain("MATCHING_DEDUP_RETENTION_S");
    const minute = resolveConfig({ MATCHING_DEDUP_RETENTION_S: "60" }, new Map(), "conductor");
    expect(minute.ok && minute.config.dedupRetentionSeconds).toBe(60);
    const defaults = resolveConfig({}, new Map(), "conductor");
    expect(defaults.ok && defaults.config.dedupRetentionSeconds).toBe(3600);
  });

  test("MATCHING_OPERATOR_USERS: broker user names, comma-separated; nobody by default", () => {
    const defaults = resolveConfig({}, new Map(), "conductor");
    expect(defaults.ok && defaults.config.operatorUsers).toEqual([]);
    const listed = resolveConfig(
      { MATCHING_OPERATOR_USERS: " ops, desk-2 ,," },
      new Map(),
      "conductor",
    );
    expect(listed.ok && listed.config.operatorUsers).toEqual(["ops", "desk-2"]);
    const flag = resolveConfig({}, new Map([["--operator-users", "root"]]), "conductor");
    expect(flag.ok && flag.config.operatorUsers).toEqual(["root"]);
    expect(problemsFor("MATCHING_OPERATOR_USERS", "an operator")).toContain(
      "MATCHING_OPERATOR_USERS (--operator-users)",
    );
  });

  test("a URL without a host, or a datastore URL whose path is no database number, is refused", () => {
    for (const [env, value] of [
      ["MATCHING_DATASTORE_URL", "redis://"],
      ["MATCHING_DATASTORE_URL", "redis://h/abc"],
      ["MATCHING_BROKER_URL", "amqp://"],
    ] as const) {
      expect({ value, problems: problemsFor(env, value) }).toEqual({
        value,
        problems: expect.stringContaining(env),
      });
    }
    const fine = resolveConfig(
      {
        MATCHING_DATASTORE_URL: "redis://h:6380/2",
        MATCHING_BROKER_URL: "amqp://u:p@h:5673/matchd",
      },
      new Map(),
      "conductor",
    );
    expect(fine.ok).toBe(true);
  });

  test("an upper-case scheme is refused: ioredis would take REDISS:// for a plain connection", () => {
    for (const [env, value] of [
      ["MATCHING_DATASTORE_URL", "REDISS://:pw@valkey.example:6380"],
      ["MATCHING_DATASTORE_URL", "Redis://h:6379"],
      ["MATCHING_DATASTORE_URL", " rediss://h:6380"],
      ["MATCHING_BROKER_URL", "AMQPS://u:p@h/v"],
    ] as const) {
      expect({ value, problems: problemsFor(env, value) }).toEqual({
        value,
        problems: expect.stringContaining(env),
      });
    }
    expect(problemsFor("MATCHING_DATASTORE_URL", "rediss://:pw@valkey.example:6380")).toBe(
      undefined,
    );
  });

  test("a datastore URL with a query or fragment is refused: ioredis would let it override matchd's client options", () => {
    for (const value of [
      "redis://h:6379/0?commandTimeout=abc",
      "redis://h:6379?password=s3cret",
      "redis://h:6379/?",
      "redis://h:6379#x",
    ]) {
      const problems = problemsFor("MATCHING_DATASTORE_URL", value);
      expect({ value, refused: problems !== undefined }).toEqual({ value, refused: true });
      expect(problems).not.toContain("s3cret");
    }
  });

  test("MATCHING_* variables that are no setting are named (a misspelt setting would fall back to its default)", () => {
    expect(
      unknownSettingNames({
        MATCHING_DURABLITY: "memory",
        MATCHING_DURABILITY: "memory",
        MATCHING_REPLICA_URL: "redis://h",
        PATH: "/bin",
      }),
    ).toEqual(["MATCHING_DURABLITY"]);
  });

  test("a rejected URL is echoed without its password, parseable or not", () => {
    const result = resolveConfig(
      {
        MATCHING_BROKER_URL: "amqp://user:s3cret@host:99999/",
        MATCHING_DATASTORE_URL: "http://admin:hun@ter2@host:1/",
      },
      new Map(),
      "conductor",
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.problems.join("\n");
    expect(text).not.toContain("s3cret");
    expect(text).not.toContain("ter2");
    expect(text).toContain("amqp://user:***@host:99999/");
    // A generated secret with a raw / in it makes the URL unparseable, and is still hidden.
    const slash = resolveConfig(
      { MATCHING_BROKER_URL: "amqp://matchd:Xy7/q+Zr@rabbit/matchq" },
      new Map(),
      "conductor",
    );
    expect(slash.ok).toBe(false);
    if (slash.ok) return;
    expect(slash.problems.join("\n")).not.toContain("q+Zr");
    expect(slash.problems.join("\n")).toContain("amqp://matchd:***@rabbit/matchq");
    // Malformed values are the ones rejected and echoed: no // after the scheme, or none.
    for (const value of ["amqp:/matchd:S3cretPw@rabbit:5672", "matchd:S3cretPw@rabbit:5672"]) {
      const malformed = resolveConfig({ MATCHING_BROKER_URL: value }, new Map(), "conductor");
      expect(malformed.ok).toBe(false);
      if (!malformed.ok) expect(malformed.problems.join("\n")).not.toContain("S3cretPw");
    }
  });

  test("every bad value is reported, naming variable, flag and accepted values", () => {
    const result = resolveConfig(
      {
        MATCHING_DATASTORE_URL: "http://nope",
        MATCHING_BROKER_URL: "not a url",
        MATCHING_PARTITION: "-1",
        MATCHING_DURABILITY: "fsync-please",
        MATCHING_DURABILITY_TIMEOUT_MS: "0",
        MATCHING_BATCH_MAX: "100000",
      },
      new Map([["--http-port", "70000"]]),
      "conductor",
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toHaveLength(7);
    const text = result.problems.join("\n");
    for (const name of [
      "MATCHING_DATASTORE_URL",
      "MATCHING_BROKER_URL",
      "MATCHING_PARTITION (--partition)",
      "MATCHING_DURABILITY (--durability)",
      "MATCHING_DURABILITY_TIMEOUT_MS",
      "MATCHING_BATCH_MAX",
      "MATCHING_HTTP_PORT (--http-port)",
    ]) {
      expect(text).toContain(name);
    }
    expect(text).toContain("aof-replicated or memory");
  });

  test("a partition outside the partition count is refused", () => {
    const result = resolveConfig(
      { MATCHING_PARTITION: "2", MATCHING_PARTITION_COUNT: "2" },
      new Map(),
      "outbox",
    );
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.problems[0]).toContain("below MATCHING_PARTITION_COUNT");
  });
});

test("MATCHING_PARTITION=ordinal takes the number that ends the host name", () => {
  const env = { MATCHING_PARTITION: "ordinal", MATCHING_PARTITION_COUNT: "8" };
  const fromPod = resolveConfig(env, new Map(), "conductor", "matchd-conductor-03");
  expect(fromPod.ok && fromPod.config.partition).toBe(3);
  const flag = resolveConfig({}, new Map([["--partition", "ordinal"]]), "outbox", "outbox-0");
  expect(flag.ok && flag.config.partition).toBe(0);
  const bare = resolveConfig(env, new Map(), "conductor", "web");
  expect(bare.ok ? [] : bare.problems).toEqual([
    'MATCHING_PARTITION (--partition): got ordinal, but the host name "web" does not end in -<number>, as a StatefulSet\'s pod names do [from MATCHING_PARTITION]',
  ]);
  const beyond = resolveConfig(env, new Map(), "conductor", "matchd-conductor-9");
  expect(beyond.ok ? [] : beyond.problems.join()).toContain("below MATCHING_PARTITION_COUNT (8)");
});
