/**
 * The outbox's metrics, named as the contract and dashboards expect. Gauges that need
 * a datastore read (pending, stream length, lag) are refreshed just before /metrics
 * answers, never per event.
 */
import {
  type Counter,
  fineBuckets,
  type Gauge,
  type Histogram,
  type MetricsRegistry,
} from "../infra/metrics";

export interface OutboxMetrics {
  published: Counter;
  retries: Counter;
  deadLetters: Counter;
  unroutable: Counter;
  pending: Gauge;
  streamLength: Gauge;
  streamLagSeconds: Gauge;
  inFlight: Gauge;
  leaseHeld: Gauge;
  confirmLatency: Histogram;
  batchSize: Histogram;
  ackBatchSize: Histogram;
  durabilityWait: Histogram;
  durabilityTimeouts: Counter;
}

// Entry counts, not seconds: one read returns at most outboxReadCount (<= 5000) entries.
const countBuckets = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

export function createOutboxMetrics(
  registry: MetricsRegistry,
  inFlight: () => number,
): OutboxMetrics {
  return {
    published: registry.counter(
      "matching_outbox_events_published_total",
      "Events confirmed by the broker",
    ),
    retries: registry.counter(
      "matching_outbox_publish_retries_total",
      "Publish attempts that failed (nack, unroutable, channel or connection error) and were retried",
    ),
    deadLetters: registry.counter(
      "matching_outbox_dead_letter_total",
      "Stream entries moved to events:dead-letter because they could not be decoded",
    ),
    unroutable: registry.counter(
      "matching_outbox_unroutable_total",
      "Events the broker returned as unroutable (no queue bound to their exchange)",
    ),
    pending: registry.gauge(
      "matching_outbox_pending",
      "Entries read by the consumer group but not yet acknowledged",
    ),
    streamLength: registry.gauge(
      "matching_outbox_stream_length",
      "XLEN of the partition's events stream",
    ),
    streamLagSeconds: registry.gauge(
      "matching_outbox_stream_lag_seconds",
      "Age of the oldest entry still in the stream (not yet delivered), from its id",
    ),
    inFlight: registry.gauge(
      "matching_outbox_in_flight",
      "Events published and awaiting a broker confirm",
      inFlight,
    ),
    leaseHeld: registry.gauge(
      "matching_outbox_lease_held",
      "1 while this process holds the partition's lease",
    ),
    confirmLatency: registry.histogram(
      "matching_outbox_confirm_latency_seconds",
      "Time from publish() to the broker's confirm",
      fineBuckets,
    ),
    batchSize: registry.histogram(
      "matching_outbox_batch_size",
      "Entries returned by one stream read",
      countBuckets,
    ),
    ackBatchSize: registry.histogram(
      "matching_outbox_ack_batch_size",
      "Entries acknowledged (XACK + XDEL) by one transaction",
      countBuckets,
    ),
    durabilityWait: registry.histogram(
      "matching_outbox_durability_wait_seconds",
      "WAITAOF after a read (aof-replicated): until the entries read are fsynced on primary and replica",
    ),
    durabilityTimeouts: registry.counter(
      "matching_outbox_durability_timeouts_total",
      "Reads whose entries were not confirmed fsynced on primary and replica in time (nothing published; retried)",
    ),
  };
}
