/**
 * The HTTP surface shared by conductor and outbox: /healthz (alive), /readyz
 * (dependencies connected and policy satisfied), /metrics (JSON by default,
 * Prometheus text when asked), plus service-specific routes.
 */

import type { WebSocketHandler } from "bun";
import { Hono } from "hono";
import type { BunWebSocketData } from "hono/bun";
import type { MetricsRegistry } from "../metrics";
import { withinMs } from "../within";

export interface Readiness {
  ready: boolean;
  /** "degraded" is ready but with something an operator must look at. */
  status: "ready" | "degraded" | "not-ready";
  reasons: string[];
  /** The conductor's role (active / standby); absent for the outbox. */
  role?: string;
  /** Why every durability wait is held, and since when (ISO 8601); absent while none is. */
  durabilityHeld?: { reason: string; since: string };
}

export interface HttpAppOptions {
  metrics: MetricsRegistry;
  readiness: () => Readiness;
  /** Refreshes gauges that need a datastore read; must never throw. */
  beforeMetrics?: () => Promise<void>;
  routes?: (app: Hono) => void;
}

/**
 * How long /metrics waits for beforeMetrics: a datastore that hangs (a blackholed host keeps
 * its socket looking connected) must not hang the scrape; the gauges keep their last values.
 */
export const metricsRefreshTimeoutMs = 500;

/**
 * Limits on every request. The services answer small GETs only, so these are far above any
 * legitimate request and far below what would cost the event loop anything.
 */
export const httpLimits = {
  /** A longer request target is refused with 414. */
  urlBytes: 2048,
  /** Request headers (names and values) longer than this together are refused with 431. */
  headerBytes: 8192,
  /** Requests handled at once; more are refused with 503 rather than queued. */
  concurrentRequests: 64,
  /** Bytes of request body Bun reads at most (a GET has none). */
  bodyBytes: 1024,
  /** Seconds an idle connection is kept. */
  idleTimeoutS: 10,
} as const;

export function createHttpApp({ metrics, readiness, beforeMetrics, routes }: HttpAppOptions): Hono {
  const app = new Hono();
  // The probes come before the limits: a flood of queries must never make an orchestrator
  // take a healthy process for a dead one.
  app.get("/healthz", (c) => c.json({ status: "alive" }));
  app.get("/readyz", (c) => {
    const state = readiness();
    return c.json(state, state.ready ? 200 : 503);
  });
  let inFlight = 0;
  app.use("*", async (c, next) => {
    if (c.req.url.length > httpLimits.urlBytes) return c.json({ error: "URL too long" }, 414);
    let headerBytes = 0;
    c.req.raw.headers.forEach((value, name) => {
      headerBytes += name.length + value.length;
    });
    if (headerBytes > httpLimits.headerBytes) {
      return c.json({ error: "request headers too large" }, 431);
    }
    if (inFlight >= httpLimits.concurrentRequests) {
      return c.json({ error: "too many concurrent requests" }, 503);
    }
    inFlight++;
    try {
      await next();
    } finally {
      inFlight--;
    }
  });
  app.get("/metrics", async (c) => {
    if (beforeMetrics)
      await withinMs(
        beforeMetrics().catch(() => undefined),
        metricsRefreshTimeoutMs,
      );
    if (prefersPrometheusText(c.req.header("accept") ?? "")) {
      return c.text(metrics.toPrometheus(), 200, { "content-type": "text/plain; version=0.0.4" });
    }
    return c.json(metrics.toJson());
  });
  routes?.(app);
  return app;
}

/**
 * True when the Accept header ranks Prometheus text (text/plain or OpenMetrics) above JSON.
 * JSON is the contract's default and wins ties: a client that lists both equally, as axios's
 * default `application/json, text/plain, *\/*` does, calls `.json()` on the answer.
 */
export function prefersPrometheusText(accept: string): boolean {
  let text = 0;
  let json = 0;
  for (const range of accept.split(",")) {
    const [type = "", ...parameters] = range.split(";").map((part) => part.trim().toLowerCase());
    const qParameter = parameters.find((parameter) => parameter.startsWith("q="));
    const q = qParameter === undefined ? 1 : Number(qParameter.slice(2));
    if (!(q >= 0 && q <= 1)) continue;
    if (type === "text/plain" || type.includes("openmetrics")) text = Math.max(text, q);
    else if (type === "application/json") json = Math.max(json, q);
  }
  return text > 0 && text > json;
}

export interface HttpServer {
  port: number;
  stop(): Promise<void>;
  /** Sends a WebSocket message to every socket subscribed to the topic. */
  publish(topic: string, text: string): void;
}

/** `websocket`: Bun's handlers for the routes that upgrade (the feed's), when there are any. */
export function serveHttp(
  app: Hono,
  port: number,
  hostname: string,
  websocket?: WebSocketHandler<BunWebSocketData>,
): HttpServer {
  const options = {
    port,
    hostname,
    fetch: app.fetch,
    maxRequestBodySize: httpLimits.bodyBytes,
    idleTimeout: httpLimits.idleTimeoutS,
  };
  const server =
    websocket === undefined ? Bun.serve(options) : Bun.serve({ ...options, websocket });
  return {
    port: server.port ?? port,
    stop: () => server.stop(true),
    publish: (topic, text) => {
      server.publish(topic, text);
    },
  };
}
