/**
 * Notices that a service's datastore connection came back on another node (a failover):
 * counts it, logs the move, and times the outage from the connection's loss to the first
 * durable commit (or published event) after it.
 */
import type { Logger } from "../log";
import type { MetricsRegistry } from "../metrics";
import type { Valkey } from "./client";

export class FailoverTracker {
  private readonly failovers;
  private readonly recovery;
  private readonly lost;
  /** The address of the primary the connection last reached. */
  private primary: string | undefined;
  /** When the connection was lost, until the first durable write after it. */
  private lostAtMs: number | undefined;

  constructor(
    private readonly valkey: Valkey,
    registry: MetricsRegistry,
    private readonly log: Logger,
  ) {
    this.failovers = registry.counter(
      "matching_datastore_failovers_total",
      "Reconnects that reached another datastore node than before (a failover)",
    );
    this.recovery = registry.gauge(
      "matching_datastore_last_recovery_seconds",
      "From the last loss of the datastore connection to the first durable write after it",
    );
    this.lost = registry.gauge(
      "matching_datastore_connection_lost",
      "1 from the loss of the datastore connection until the first durable write after it",
      () => (this.lostAtMs === undefined ? 0 : 1),
    );
    valkey.on("close", () => {
      this.lostAtMs ??= performance.now();
    });
    valkey.on("ready", () => this.identify());
  }

  /** A write was confirmed durable: ends the outage being timed, if any. */
  durableWrite(): void {
    if (this.lostAtMs === undefined) return;
    const seconds = (performance.now() - this.lostAtMs) / 1000;
    this.lostAtMs = undefined;
    this.recovery.set(seconds);
    this.log.info("durable again after losing the datastore connection", {
      seconds: Number(seconds.toFixed(3)),
      primary: this.primary,
    });
  }

  /** The address at the other end of the socket: under Sentinel the URL does not say it. */
  private identify(): void {
    const socket = (
      this.valkey as unknown as { stream?: { remoteAddress?: string; remotePort?: number } }
    ).stream;
    const address = `${socket?.remoteAddress ?? "?"}:${socket?.remotePort ?? "?"}`;
    const before = this.primary;
    this.primary = address;
    if (before === undefined || before === address) return;
    this.failovers.inc();
    this.log.warn("datastore primary changed (a failover); reloading from the new primary", {
      from: before,
      to: address,
    });
  }

  /** The gauge behind /metrics, for tests. */
  get lostNow(): boolean {
    return this.lost.current() === 1;
  }
}
