// The "broker" boundary for the outbox's flow (`--flow events`): what RabbitMQ alone costs per
// event on this machine. The outbox-drain bench's event envelopes are published by the
// outbox's own EventPublisher (one confirm channel, persistent, mandatory, messageId, type,
// x-partition-offset header, a sliding window of unconfirmed events) to the event exchanges,
// and received by the same sink. No datastore, no stream: its throughput is the ceiling the
// outbox-drain boundary can reach with this broker here.

import type { Logger } from "../src/infra/log";
import { decodeEntry, type OutboxEvent } from "../src/outbox/envelope";
import { type ConfirmOutcome, EventPublisher } from "../src/outbox/publisher";
import { EventSink } from "./event-sink";
import { LatencyHistogram, type Percentiles } from "./histogram";
import { buildEnvelope } from "./outbox-drain";

export interface BrokerEventFloorOptions {
  brokerUrl: string;
  events: number;
  /** Unconfirmed events in flight at most, as the outbox's --window. */
  window: number;
  progress: (line: string) => void;
}

export interface BrokerEventFloorResult {
  seconds: number;
  eventsPerSecond: number;
  /** Publish to broker confirm, per event. */
  confirmLatencyMs: Percentiles;
  received: number;
  duplicates: number;
  /** Confirms other than a plain ack: nacks, returns as unroutable, a closed channel. */
  notAcked: number;
  bodyBytes: number;
}

const quietLog: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export async function runBrokerEventFloor(
  options: BrokerEventFloorOptions,
): Promise<BrokerEventFloorResult> {
  const { events, window } = options;
  const runId = `floor-${Date.now().toString(36)}`;
  // Built before the timer, like the drain's backlog; entry ids only need to be unique.
  const outboxEvents: OutboxEvent[] = [];
  let bodyBytes = 0;
  for (let n = 0; n < events; n++) {
    const body = buildEnvelope(0, runId, n);
    // The outbox's own decoding, so the events are exactly what it would publish.
    const decoded = decodeEntry({ id: `1-${n}`, fields: ["event", body] });
    if (!decoded.ok) throw new Error(`bench envelope ${n} does not decode: ${decoded.reason}`);
    outboxEvents.push(decoded.event);
    bodyBytes += Buffer.byteLength(body);
  }

  const sink = await EventSink.open(options.brokerUrl, runId, events);
  let publisher: EventPublisher | undefined;
  try {
    publisher = await EventPublisher.open(
      options.brokerUrl,
      "matchd-bench-event-floor",
      quietLog,
      () => undefined,
    );
    const latency = new LatencyHistogram();
    const publishedAt = new Float64Array(events);
    let outstanding = 0;
    let confirmed = 0;
    let notAcked = 0;
    let wake: (() => void) | null = null;
    const settled = (n: number, outcome: ConfirmOutcome) => {
      if (outcome === "ack") latency.record((performance.now() - publishedAt[n]!) * 1e6);
      else notAcked++;
      outstanding--;
      confirmed++;
      const waiting = wake;
      wake = null;
      waiting?.();
    };
    options.progress(`broker: ${events} events, window ${window}`);
    // A lost confirm or event must end the run with a failed invariant, not hang it.
    const deadline = performance.now() + Math.max(60_000, events * 2);
    const started = performance.now();
    for (let n = 0; n < events && performance.now() < deadline; n++) {
      while (outstanding >= window && performance.now() < deadline) {
        await Promise.race([new Promise<void>((resolve) => (wake = resolve)), Bun.sleep(1000)]);
      }
      if (publisher.failed) throw publisher.failed;
      outstanding++;
      publishedAt[n] = performance.now();
      if (!publisher.publish(outboxEvents[n]!, (outcome) => settled(n, outcome))) {
        await publisher.drained();
      }
    }
    while ((confirmed < events || sink.received < events) && performance.now() < deadline) {
      sink.throwIfFailed();
      await Bun.sleep(1);
    }
    // Ends when the last confirm and the last event are in (polled every millisecond).
    const seconds = (performance.now() - started) / 1000;
    return {
      seconds,
      eventsPerSecond: events / seconds,
      confirmLatencyMs: latency.percentilesMs(),
      received: sink.received,
      duplicates: sink.duplicates,
      notAcked: notAcked + (events - confirmed),
      bodyBytes: Math.round(bodyBytes / events),
    };
  } finally {
    await publisher?.close().catch(() => undefined);
    await sink.close().catch(() => undefined);
  }
}
