/**
 * Asks the Sentinels of a redis+sentinel:// URL about the monitored primary: what the boot
 * check reports and what the durability rule needs (down-after-milliseconds).
 */

import Redis from "ioredis";
import type { DatastoreAddress, SentinelAddress } from "./address";
import type { CheckOutcome } from "./durability";
import { probeClient } from "./probe-client";
import { replicaLagLimitS, type SentinelReplicaView } from "./replica-rule";

export interface SentinelView {
  sentinel: SentinelAddress;
  /** SENTINEL MASTER's fields: ip, port, flags, num-slaves, quorum, down-after-milliseconds... */
  master: Map<string, string>;
}

export type SentinelTarget = Extract<DatastoreAddress, { kind: "sentinel" }>;

/** SENTINEL MASTER from every Sentinel that answers within 1 s; the others are left out. */
export async function askSentinels(
  address: SentinelTarget,
  sentinelPassword: string,
): Promise<{ views: SentinelView[]; errors: string[] }> {
  const errors: string[] = [];
  const views = await Promise.all(
    address.sentinels.map(async (sentinel): Promise<SentinelView | undefined> => {
      const client = probeClient({
        host: sentinel.host,
        port: sentinel.port,
        ...(sentinelPassword === "" ? {} : { password: sentinelPassword }),
      });
      try {
        await client.connect();
        const reply = (await client.call("SENTINEL", "MASTER", address.masterName)) as string[];
        const master = new Map<string, string>();
        for (let i = 0; i + 1 < reply.length; i += 2) master.set(reply[i]!, reply[i + 1]!);
        return { sentinel, master };
      } catch (error) {
        errors.push(`${sentinel.host}:${sentinel.port}: ${(error as Error).message}`);
        return undefined;
      } finally {
        client.disconnect();
      }
    }),
  );
  return { views: views.filter((v): v is SentinelView => v !== undefined), errors };
}

/** The largest down-after-milliseconds the answering Sentinels use (undefined: none answered). */
export function largestDownAfterMs(views: readonly SentinelView[]): number | undefined {
  const values = views
    .map((v) => Number(v.master.get("down-after-milliseconds")))
    .filter((n) => Number.isFinite(n));
  return values.length === 0 ? undefined : Math.max(...values);
}

/**
 * The boot checks of a Sentinel URL: enough Sentinels answer to elect a failover leader, they
 * monitor the primary with a replica, and the lag limit the durability rule takes from their
 * down-after-milliseconds (replica-rule.ts).
 */
export async function checkSentinels(
  address: SentinelTarget,
  sentinelPassword: string,
): Promise<{ outcomes: CheckOutcome[]; lagLimitS: number }> {
  const { views, errors } = await askSentinels(address, sentinelPassword);
  const total = address.sentinels.length;
  const majority = Math.floor(total / 2) + 1;
  const outcomes: CheckOutcome[] = [
    {
      name: "sentinels answer",
      ok: views.length >= 1,
      ...(views.length < majority && views.length >= 1 ? { warning: true } : {}),
      detail:
        views.length >= majority
          ? `${views.length} of ${total} Sentinels know master ${address.masterName}`
          : `${views.length} of ${total} Sentinels answered (a failover needs a majority)${errors.length > 0 ? `: ${errors.join("; ")}` : ""}`,
    },
  ];
  const replicas = Math.max(0, ...views.map((v) => Number(v.master.get("num-slaves") ?? 0)));
  if (views.length > 0)
    outcomes.push({
      name: "sentinels see a replica",
      ok: replicas >= 1,
      detail:
        replicas >= 1
          ? `${replicas} replica(s) known to the Sentinels`
          : `the Sentinels know no replica of ${address.masterName}: nothing could be promoted`,
    });
  const downAfterMs = largestDownAfterMs(views);
  const lagLimitS = replicaLagLimitS(downAfterMs);
  if (downAfterMs !== undefined)
    outcomes.push({
      name: "replica lag limit",
      ok: true,
      detail: `a replica silent for over ${lagLimitS} s leaves the durability waits (Sentinel down-after-milliseconds ${downAfterMs})`,
    });
  return { outcomes, lagLimitS };
}

/**
 * What a Sentinel publishes as a failover begins, moves on or ends. The first, `+try-failover`,
 * comes with the failover flag already set, at least a timer tick (about 100 ms) before the
 * replica is promoted: a watch that asks at once holds its writes before the promotion, so the
 * old primary takes nothing the promoted one lacks, and the replicas resynchronise partially.
 */
export const failoverChannels = [
  "+try-failover",
  "+elected-leader",
  "+failover-state-select-slave",
  "+selected-slave",
  "+failover-state-send-slaveof-noone",
  "+promoted-slave",
  "+failover-state-reconf-slaves",
  "+failover-end",
  "+failover-end-for-timeout",
  "-failover-abort-not-elected",
  "-failover-abort-no-good-slave",
  "-failover-abort-slave-timeout",
  "+switch-master",
  "+odown",
  "-odown",
] as const;

/**
 * Asks every Sentinel of a URL, on a connection of its own kept open, what the durability rule
 * needs (replica-rule.ts): the primary it names with its flags, and each replica's flags.
 * A Sentinel that does not answer within `timeoutMs` is left out of that round.
 */
export class SentinelPoller {
  private readonly clients: Redis[];
  /** One subscriber per Sentinel once someone listens (onFailoverEvent). */
  private subscribers: Redis[] = [];

  constructor(
    private readonly address: SentinelTarget,
    private readonly sentinelPassword: string,
    timeoutMs = 500,
  ) {
    this.clients = address.sentinels.map((sentinel) => {
      const client = new Redis({
        host: sentinel.host,
        port: sentinel.port,
        ...(sentinelPassword === "" ? {} : { password: sentinelPassword }),
        lazyConnect: true,
        connectTimeout: timeoutMs,
        commandTimeout: timeoutMs,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        // Asked again every round: a Sentinel that comes back is counted within one.
        retryStrategy: () => 200,
      });
      client.on("error", () => undefined);
      return client;
    });
  }

  /** Sentinels in the URL. */
  get count(): number {
    return this.clients.length;
  }

  /** One round: the views of the Sentinels that answered. */
  async poll(): Promise<SentinelReplicaView[]> {
    const views = await Promise.all(this.clients.map((client) => this.ask(client)));
    return views.filter((v): v is SentinelReplicaView => v !== undefined);
  }

  private async ask(client: Redis): Promise<SentinelReplicaView | undefined> {
    try {
      if (client.status === "wait") await client.connect();
      const name = this.address.masterName;
      const [master, replicas] = await Promise.all([
        client.call("SENTINEL", "MASTER", name) as Promise<string[]>,
        client.call("SENTINEL", "REPLICAS", name) as Promise<string[][]>,
      ]);
      const fields = flatFields(master);
      return {
        master: `${fields.get("ip")}:${fields.get("port")}`,
        masterRunId: fields.get("runid") ?? "",
        configEpoch: Number(fields.get("config-epoch") ?? 0),
        masterFlags: (fields.get("flags") ?? "").split(","),
        downAfterMs: Number(fields.get("down-after-milliseconds") ?? 30_000),
        replicas: replicas.map((reply) => {
          const replica = flatFields(reply);
          return {
            address: `${replica.get("ip")}:${replica.get("port")}`,
            flags: (replica.get("flags") ?? "").split(","),
            roleReported: replica.get("role-reported") ?? "slave",
            runId: replica.get("runid") ?? "",
            priority: Number(
              replica.get("slave-priority") ?? replica.get("replica-priority") ?? 100,
            ),
            // Absent (an older Sentinel): unknown, never taken for "never read".
            infoRefreshMs: Number(replica.get("info-refresh") ?? Number.NaN),
          };
        }),
      };
    } catch {
      return undefined;
    }
  }

  /**
   * Calls `listener` whenever a Sentinel publishes a step of a failover of the monitored
   * primary (failoverChannels): the rounds of poll() would see it up to an interval late.
   */
  onFailoverEvent(listener: (channel: string, message: string) => void): void {
    const name = this.address.masterName;
    this.subscribers = this.address.sentinels.map((sentinel) => {
      const client = new Redis({
        host: sentinel.host,
        port: sentinel.port,
        ...(this.sentinelPassword === "" ? {} : { password: this.sentinelPassword }),
        maxRetriesPerRequest: null,
        retryStrategy: () => 200,
      });
      client.on("error", () => undefined);
      // Every payload names the primary: `master <name> <ip> <port>`, a replica's
      // `slave <addr> <ip> <port> @ <name> ...`, or +switch-master's `<name> <old> <new>`;
      // another primary's failover is not ours.
      client.on("message", (channel: string, message: string) => {
        if (message.split(" ").includes(name)) listener(channel, message);
      });
      client.subscribe(...failoverChannels).catch(() => undefined);
      return client;
    });
  }

  close(): void {
    for (const client of [...this.clients, ...this.subscribers]) client.disconnect();
  }
}

function flatFields(reply: readonly string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < reply.length; i += 2) map.set(reply[i]!, reply[i + 1]!);
  return map;
}
