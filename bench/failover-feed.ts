/**
 * The failover bench's market-data check: a feed runs through the faults with a subscriber on
 * each of the workload's pairs (at most 8), and at the end each subscriber's book must equal
 * the conductor's, every message having chained and passed its checksum. A feed that had to
 * start again tells its subscribers with a fresh snapshot: counted, and allowed.
 */

import { createValkey } from "../src/infra/valkey/client";
import { BenchFeedClient, booksDiffering, subscribersCaughtUp } from "./feed-clients";
import type { BenchReport } from "./report";
import { type ServiceProcess, startService } from "./services";

export interface FeedFound {
  /** 0 or true to pass. */
  checks: Record<string, number | boolean>;
  resnapshots: number;
}

export class FeedCheck {
  private constructor(
    private readonly feed: ServiceProcess,
    private readonly clients: BenchFeedClient[],
    private readonly progress: (line: string) => void,
  ) {}

  /** Starts a feed with the services' flags and subscribes to each pair's book. */
  static async start(
    flags: Record<string, string | number>,
    pairIds: readonly number[],
    progress: (line: string) => void,
    register: (service: ServiceProcess) => void,
  ): Promise<FeedCheck> {
    const feed = await startService("feed", flags, progress, register);
    const ws = `${feed.url.replace(/^http/, "ws")}/ws`;
    const clients: BenchFeedClient[] = [];
    for (const pairId of pairIds.slice(0, 8)) clients.push(await BenchFeedClient.open(ws, pairId));
    return new FeedCheck(feed, clients, progress);
  }

  /**
   * Once the faults are over: waits for the subscribers to catch up, compares their books with
   * the conductor's and stops the feed.
   */
  async collect(datastoreUrl: string, partition: number, conductorUrl: string): Promise<FeedFound> {
    const valkey = createValkey(datastoreUrl, { name: "matchd-bench-feed-check" });
    valkey.on("error", () => undefined);
    const sum = (f: (c: BenchFeedClient) => number) => this.clients.reduce((n, c) => n + f(c), 0);
    let caughtUp = true;
    try {
      await subscribersCaughtUp(this.feed.url, valkey, partition, this.clients);
    } catch (error) {
      caughtUp = false;
      this.progress(`feed: ${(error as Error).message}`);
    }
    const checks: Record<string, number | boolean> = {
      feedSubscribersCaughtUp: caughtUp,
      feedBooksDifferingFromTheConductor: await booksDiffering(conductorUrl, this.clients),
      feedChecksumFailures: sum((c) => c.book.checksumFailures),
      feedSequenceGaps: sum((c) => c.book.chainBreaks),
      feedSubscribersCutOff: this.clients.filter((c) => c.closed !== undefined).length,
    };
    for (const client of this.clients) client.close();
    valkey.disconnect();
    await this.feed.stop();
    return { checks, resnapshots: sum((c) => c.book.snapshots - 1) };
  }

  /** Adds what collect() found to the report; a failed check fails the run. */
  apply(report: BenchReport, found: FeedFound): void {
    for (const [name, value] of Object.entries(found.checks)) {
      report.invariants[name] = value;
      if (value !== 0 && value !== true) report.invariants.ok = false;
    }
    const figures = Object.keys(found.checks).filter((k) => typeof found.checks[k] === "number");
    report.checks = [...(report.checks ?? []), ...figures];
    report.extra["feed subscribers' second snapshots (the feed started again, and said so)"] =
      found.resnapshots;
  }
}
