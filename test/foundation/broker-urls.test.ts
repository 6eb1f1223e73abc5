/** A broker setting that lists a cluster's nodes: parsed, validated, redacted, and connected in turn. */
import { describe, expect, test } from "bun:test";
import { describeConfig, resolveConfig } from "../../src/config/resolve";
import { brokerUrls, connectToFirstAnswering } from "../../src/infra/amqp/broker-urls";

describe("broker URL lists", () => {
  test("the config takes up to nine nodes and hides every password", () => {
    const list = "amqp://u:s1@127.0.0.1:5672/v, amqp://u:s2@127.0.0.1:5673/v";
    const result = resolveConfig({ MATCHING_BROKER_URL: list }, new Map(), "conductor");
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const shown = JSON.stringify(describeConfig(result.config));
    expect(shown).not.toContain("s1");
    expect(shown).not.toContain("s2");
    expect(brokerUrls(result.config.brokerUrl)).toHaveLength(2);
    const bad = resolveConfig(
      { MATCHING_BROKER_URL: "amqp://h:1/v,redis://h:2" },
      new Map(),
      "conductor",
    );
    expect(bad.ok).toBe(false);
    const tooMany = Array.from({ length: 10 }, (_, i) => `amqp://h:${i + 1}/v`).join(",");
    expect(resolveConfig({ MATCHING_BROKER_URL: tooMany }, new Map(), "conductor").ok).toBe(false);
  });

  test("connects to the first node that answers, and starts there next time", async () => {
    const tried: string[] = [];
    const connect = async (url: string) => {
      tried.push(url);
      if (url === "a") throw new Error("down");
      return url;
    };
    expect(await connectToFirstAnswering("a,b,c", connect, () => false)).toBe("b");
    expect(await connectToFirstAnswering("a,b,c", connect, () => false)).toBe("b");
    expect(tried).toEqual(["a", "b", "b"]);
    const fatal = new Error("refused");
    await expect(
      connectToFirstAnswering(
        "x,y",
        async () => Promise.reject(fatal),
        (e) => e === fatal,
      ),
    ).rejects.toBe(fatal);
  });
});
