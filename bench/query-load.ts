/**
 * Load on the side doors: while a pipeline run is timed, `connections` loops send the
 * conductor's HTTP queries back to back (digest, a depth ladder, an order, a stored result,
 * metrics, in turn), so the report can set the pipeline's latency under that load beside
 * the same run without it.
 */
import { bearerHeaders } from "../src/infra/http/bearer";
import { LatencyHistogram, type Percentiles } from "./histogram";

export interface QueryLoadOptions {
  conductorUrl: string;
  connections: number;
  /** MATCHING_HTTP_TOKEN, sent when set: the private queries need it. */
  token: string;
  pairIds: readonly number[];
  /** Ids of commands (and their orders) sent so far, for the private queries. */
  sample: () => { commandId: string; orderId: string } | undefined;
}

export interface QueryLoadResult {
  connections: number;
  requests: number;
  perSecond: number;
  /** Answers other than 200 or 404 (an unknown order is a valid answer), and failed requests. */
  errors: number;
  latencyMs: Percentiles;
}

export function startQueryLoad(options: QueryLoadOptions): { stop(): Promise<QueryLoadResult> } {
  const latency = new LatencyHistogram();
  const headers = bearerHeaders(options.token);
  let running = true;
  let requests = 0;
  let errors = 0;
  const started = performance.now();
  const pathFor = (turn: number): string => {
    const pairId = options.pairIds[turn % options.pairIds.length]!;
    const sent = options.sample();
    switch (turn % 5) {
      case 0:
        return "/digest";
      case 1:
        return `/books/${pairId}?depth=50`;
      case 2:
        return `/orders/${encodeURIComponent(sent?.orderId ?? "none")}`;
      case 3:
        return `/commands/${encodeURIComponent(sent?.commandId ?? "none")}`;
      default:
        return "/metrics";
    }
  };
  const loop = async (offset: number) => {
    for (let turn = offset; running; turn++) {
      const sentAt = performance.now();
      try {
        const response = await fetch(`${options.conductorUrl}${pathFor(turn)}`, { headers });
        await response.arrayBuffer();
        if (response.status !== 200 && response.status !== 404) errors++;
      } catch {
        errors++;
      }
      requests++;
      latency.record((performance.now() - sentAt) * 1e6);
    }
  };
  const loops = Array.from({ length: options.connections }, (_, i) => loop(i));
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      const seconds = (performance.now() - started) / 1000;
      return {
        connections: options.connections,
        requests,
        perSecond: Math.round(requests / seconds),
        errors,
        latencyMs: latency.percentilesMs(),
      };
    },
  };
}
