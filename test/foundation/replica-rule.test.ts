/**
 * The replica rule with Sentinels, as a pure function: a replica counts until the Sentinels
 * say it cannot be promoted, and nothing counts on a primary they no longer name.
 */
import { describe, expect, test } from "bun:test";
import type { ListedReplica } from "../../src/infra/valkey/fsync-policy";
import {
  announcedAddress,
  type SentinelReplicaView,
  sentinelReplicaRule,
} from "../../src/infra/valkey/replica-rule";

const watched = "127.0.0.1:7001";
const b = "127.0.0.1:7002";
const c = "127.0.0.1:7003";
const online = (port: number): ListedReplica => ({
  ip: "127.0.0.1",
  port,
  state: "online",
  lag: 0,
});
const view = (
  replicas: Record<string, string>,
  master = watched,
  masterFlags = "master",
  configEpoch = 1,
): SentinelReplicaView => ({
  master,
  configEpoch,
  masterFlags: masterFlags.split(","),
  replicas: Object.entries(replicas).map(([address, flags]) => ({
    address,
    flags: flags.split(",").filter((f) => f !== "reports-master"),
    roleReported: flags.includes("reports-master") ? "master" : "slave",
  })),
});

describe("the replica rule with Sentinels", () => {
  test("a replica detached by REPLICAOF NO ONE (a planned handover) still counts", () => {
    // valkey-2 left the primary's list, but the Sentinels hold it healthy (promoted).
    const views = [0, 1, 2].map(() => view({ [b]: "slave,promoted", [c]: "slave" }));
    const outcome = sentinelReplicaRule({ watched, listed: [online(7003)], views, sentinels: 3 });
    expect(outcome).toEqual({
      kind: "required",
      replicas: 2,
      counted: [b, c],
      excluded: [],
      standIns: [],
    });
  });

  test("a replica is left out once a majority answer and every one flags it down", () => {
    const down = [0, 1].map(() => view({ [b]: "s_down,slave,disconnected", [c]: "slave" }));
    expect(
      sentinelReplicaRule({ watched, listed: [online(7003)], views: down, sentinels: 3 }),
    ).toMatchObject({ replicas: 1, excluded: [b] });
    // One Sentinel that still sees it up keeps it in: that one could lead the failover.
    const split = [...down, view({ [b]: "slave", [c]: "slave" })];
    expect(
      sentinelReplicaRule({ watched, listed: [online(7003)], views: split, sentinels: 3 }),
    ).toMatchObject({ replicas: 2, excluded: [] });
    // A minority answering cannot leave anything out.
    expect(
      sentinelReplicaRule({ watched, listed: [online(7003)], views: down.slice(1), sentinels: 3 }),
    ).toMatchObject({ replicas: 2, excluded: [] });
  });

  test("a replica the primary lists but no Sentinel knows yet counts; the primary itself never", () => {
    const views = [view({ [c]: "slave", [watched]: "slave" })];
    const outcome = sentinelReplicaRule({
      watched,
      listed: [online(7002), online(7003)],
      views,
      sentinels: 1,
    });
    expect(outcome).toMatchObject({ replicas: 2, counted: [b, c] });
  });

  test("a demoted primary still answering as one is left out only on every Sentinel's word", () => {
    // After a handover: valkey-1 was primary until Sentinel promoted this one (epoch 2).
    const old = "127.0.0.1:7009";
    const views = [0, 1].map(() =>
      view({ [old]: "slave,reports-master", [c]: "slave" }, watched, "master", 2),
    );
    const all = [
      ...views,
      view({ [old]: "slave,reports-master", [c]: "slave" }, watched, "master", 2),
    ];
    expect(
      sentinelReplicaRule({ watched, listed: [online(7003)], views: all, sentinels: 3 }),
    ).toEqual({ kind: "required", replicas: 1, counted: [c], excluded: [old], standIns: [] });
    // A Sentinel behind the others cannot vouch for it: it counts until all three agree.
    const behind = view({ [c]: "slave" }, old, "master", 1);
    expect(
      sentinelReplicaRule({
        watched,
        listed: [online(7003)],
        views: [...views, behind],
        sentinels: 3,
      }),
    ).toMatchObject({ kind: "required", replicas: 2, counted: [c, old], excluded: [] });
  });

  test("nothing is acknowledged on a primary the Sentinels no longer name, or are failing over", () => {
    const moved = [view({ [c]: "slave" }), view({ [c]: "slave" }, b, "master", 2)];
    expect(sentinelReplicaRule({ watched, listed: [], views: moved, sentinels: 3 })).toEqual({
      kind: "violated",
      reason: `a Sentinel names ${b} the primary, not ${watched}`,
    });
    const failing = [view({ [b]: "slave" }, watched, "master,o_down,failover_in_progress")];
    expect(
      sentinelReplicaRule({ watched, listed: [], views: failing, sentinels: 3 }),
    ).toMatchObject({ kind: "violated" });
  });

  test("the replica a Sentinel promoted is current while that Sentinel still reconfigures the rest", () => {
    // valkey-1 (old) froze; the leader promoted this one (epoch 2) and names old until its
    // failover ends; the others switched already; one lags at epoch 1 with old o_down.
    const old = "127.0.0.1:7009";
    const leader = view(
      { [watched]: "slave,promoted,reports-master", [c]: "slave,reconf_sent" },
      old,
      "s_down,o_down,master,failover_in_progress",
      2,
    );
    const switched = view(
      { [old]: "slave,s_down,disconnected", [c]: "slave" },
      watched,
      "master",
      2,
    );
    const lagging = view({ [watched]: "slave", [c]: "slave" }, old, "s_down,o_down,master", 1);
    const outcome = sentinelReplicaRule({
      watched,
      listed: [online(7003)],
      views: [leader, switched, lagging],
      sentinels: 3,
    });
    expect(outcome).toEqual({
      kind: "required",
      replicas: 1,
      counted: [c],
      excluded: [old],
      standIns: [],
    });
    // Promoted but not yet answering as a primary: the failover can still be aborted.
    const early = view({ [watched]: "slave,promoted", [c]: "slave" }, old, "o_down,master", 2);
    expect(
      sentinelReplicaRule({ watched, listed: [], views: [early, switched], sentinels: 3 }),
    ).toMatchObject({ kind: "violated" });
    // On the old primary, the leader's failover forbids everything.
    expect(
      sentinelReplicaRule({ watched: old, listed: [], views: [leader], sentinels: 3 }),
    ).toMatchObject({ kind: "violated" });
  });

  test("at least one replica is always needed", () => {
    expect(sentinelReplicaRule({ watched, listed: [], views: [view({})], sentinels: 1 })).toEqual({
      kind: "required",
      replicas: 1,
      counted: [],
      excluded: [],
      standIns: [],
    });
  });
});

describe("two faults at once: what WAITAOF can count", () => {
  const sDown = "slave,s_down,disconnected";

  test("F1: a replica the Sentinels left out but the primary still lists is needed too", () => {
    // b is cut off from the Sentinels only: it still replicates, and WAITAOF counts its fsync.
    // c, the one they would promote, stalls: b's fsync must not answer in its place.
    const views = [0, 1, 2].map(() => view({ [b]: sDown, [c]: "slave" }));
    const outcome = sentinelReplicaRule({
      watched,
      listed: [online(7002), online(7003)],
      views,
      sentinels: 3,
    });
    expect(outcome).toEqual({
      kind: "required",
      replicas: 2,
      counted: [c],
      excluded: [b],
      standIns: [b],
    });
    // Once the primary no longer lists b, its fsync cannot count: c's alone is needed.
    expect(
      sentinelReplicaRule({ watched, listed: [online(7003)], views, sentinels: 3 }),
    ).toMatchObject({ replicas: 1, standIns: [] });
    // Nor while b is silent past the lag limit (frozen): it would hold every wait for the
    // primary's repl-timeout. Its lag unread, it counts.
    const frozen = { ...online(7002), lag: 3 };
    expect(
      sentinelReplicaRule({ watched, listed: [frozen, online(7003)], views, sentinels: 3 }),
    ).toMatchObject({ replicas: 1, standIns: [] });
    const unread = { ...online(7002), lag: Number.NaN };
    expect(
      sentinelReplicaRule({ watched, listed: [unread, online(7003)], views, sentinels: 3 }),
    ).toMatchObject({ replicas: 2, standIns: [b] });
  });

  test("F1: a rejoining old primary and a replica of priority 0 stand in too", () => {
    const old = "127.0.0.1:7009";
    const views = [0, 1, 2].map(() => ({
      ...view({ [old]: "slave,reports-master", [c]: "slave" }, watched, "master", 2),
      replicas: [
        { address: old, flags: ["slave"], roleReported: "master" },
        { address: b, flags: ["slave"], roleReported: "slave", priority: 0 },
        { address: c, flags: ["slave"], roleReported: "slave", priority: 100 },
      ],
    }));
    const outcome = sentinelReplicaRule({
      watched,
      listed: [online(7002), online(7003), online(7009)],
      views,
      sentinels: 3,
    });
    expect(outcome).toEqual({
      kind: "required",
      replicas: 3,
      counted: [c],
      excluded: [b, old],
      standIns: [b, old],
    });
  });

  test("a replica no Sentinel has read yet is left out: the old primary re-added after a failover", () => {
    // valkey-1 was primary and is cut off; re-added as a replica it has never answered INFO,
    // and Sentinel promotes no replica without fresh INFO. Its link still looks up (DROP).
    const old = "127.0.0.1:7009";
    const fresh = (infoRefreshMs: number) =>
      view({ [c]: "slave" }, watched, "master", 2).replicas.concat({
        address: old,
        flags: ["slave"],
        roleReported: "slave",
        infoRefreshMs,
      });
    const views = [0, 1].map(() => ({ ...view({}, watched, "master", 2), replicas: fresh(0) }));
    expect(
      sentinelReplicaRule({ watched, listed: [online(7003)], views, sentinels: 3 }),
    ).toMatchObject({ replicas: 1, counted: [c], excluded: [old] });
    // One Sentinel of the latest epoch that has read it (a refresh 40 ms ago) keeps it in.
    const read = { ...view({}, watched, "master", 2), replicas: fresh(40) };
    expect(
      sentinelReplicaRule({
        watched,
        listed: [online(7003)],
        views: [...views, read],
        sentinels: 3,
      }),
    ).toMatchObject({ replicas: 2, excluded: [] });
  });

  test("F2: without the leader's view a replica reporting master still counts", () => {
    // A planned handover: the leader (not answering) promoted c; the two others, still at
    // epoch 1 and not told, see c report master and name this primary. b follows it.
    const others = [0, 1].map(() => view({ [b]: "slave", [c]: "slave,reports-master" }));
    const outcome = sentinelReplicaRule({
      watched,
      listed: [online(7002)],
      views: others,
      sentinels: 3,
    });
    // c counts and cannot acknowledge here: nothing is acknowledged that c will lack.
    expect(outcome).toMatchObject({ kind: "required", replicas: 2, counted: [b, c] });
  });

  test("F4: the watched server is named as the Sentinels announce it, found by its run id", () => {
    const views: SentinelReplicaView[] = [
      {
        master: "valkey-a.internal:6379",
        masterRunId: "run-a",
        configEpoch: 1,
        masterFlags: ["master"],
        replicas: [
          {
            address: "valkey-b.internal:6379",
            flags: ["slave"],
            roleReported: "slave",
            runId: "run-b",
          },
        ],
      },
    ];
    expect(announcedAddress(views, "run-a")).toBe("valkey-a.internal:6379");
    expect(announcedAddress(views, "run-b")).toBe("valkey-b.internal:6379");
    expect(announcedAddress(views, "run-x")).toBeUndefined();
    expect(announcedAddress(views, "")).toBeUndefined();
  });
});
