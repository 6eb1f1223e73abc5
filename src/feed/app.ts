/**
 * The feed's HTTP face: the live page at `/`, the WebSocket at `/ws`, REST snapshots at
 * `/feed/books/:pairId?depth=` (the `seq` a WebSocket subscriber would see), and the probes
 * and metrics every service has.
 */

import type { ServerWebSocket } from "bun";
import type { Hono } from "hono";
import { upgradeWebSocket, websocket } from "hono/bun";
import { createHttpApp } from "../infra/http/app";
import type { MetricsRegistry } from "../infra/metrics";
import { type ClientSocket, closeCodes, type FeedConnection } from "./hub";
import { type BookDepth, bookDepths } from "./messages";
import { livePage } from "./page";
import type { FeedService } from "./service";

/** Bytes one client message may have: subscribe requests are tiny. */
export const maxRequestBytes = 4096;

function socketOf(raw: ServerWebSocket<unknown>): ClientSocket {
  return {
    send: (text) => raw.send(text),
    bufferedAmount: () => raw.getBufferedAmount(),
    close: (code, reason) => raw.close(code, reason),
    subscribe: (topic) => raw.subscribe(topic),
    unsubscribe: (topic) => raw.unsubscribe(topic),
  };
}

function parseDepth(text: string | undefined): BookDepth | undefined {
  if (text === undefined) return 10;
  if (text === "all") return "all";
  const depth = bookDepths.find((d) => String(d) === text);
  return depth;
}

function routes(app: Hono, service: FeedService): void {
  app.get("/", (c) => c.html(livePage));
  app.get("/feed/books/:pairId", (c) => {
    const pairText = c.req.param("pairId");
    const depth = parseDepth(c.req.query("depth"));
    if (!/^[1-9][0-9]{0,15}$/.test(pairText) || depth === undefined) {
      return c.json(
        { error: `pair id a positive integer, depth one of ${bookDepths.join(", ")}` },
        400,
      );
    }
    const pairId = Number(pairText);
    const snapshot = service.hub.snapshot(pairId, "book", depth);
    if (snapshot === undefined) return c.json({ error: service.notServed(pairId) }, 404);
    return c.json(snapshot);
  });
  app.get(
    "/ws",
    upgradeWebSocket(() => {
      let connection: FeedConnection | undefined;
      return {
        onOpen: (_event, ws) => {
          connection = service.hub.open(socketOf(ws.raw as ServerWebSocket<unknown>));
        },
        onMessage: (event, _ws) => {
          if (connection === undefined) return;
          const data = event.data;
          if (typeof data === "string") service.hub.receive(connection, data);
          else
            service.hub.close(connection, closeCodes.badRequests, "binary messages are not read");
        },
        onClose: () => {
          if (connection !== undefined) service.hub.closed(connection);
        },
      };
    }),
  );
}

export function feedApp(service: FeedService, registry: MetricsRegistry): Hono {
  return createHttpApp({
    metrics: registry,
    readiness: () => {
      const { ready, reason } = service.status;
      return { ready, status: ready ? "ready" : "not-ready", reasons: ready ? [] : [reason] };
    },
    routes: (app) => routes(app, service),
  });
}

/** Bun's WebSocket settings for the feed, around hono's handlers. */
export function feedWebSocket(clientBufferBytes: number) {
  return {
    ...websocket,
    maxPayloadLength: maxRequestBytes,
    // The hub cuts a client off with a reason past its bound (FeedHub.cutSlowClients). Bun's
    // limit is above it, a backstop: past it Bun closes the socket, where it would otherwise
    // drop a broadcast message and go on sending the ones after it.
    backpressureLimit: clientBufferBytes * 2,
    closeOnBackpressureLimit: true,
    idleTimeout: 60,
    sendPings: true,
  };
}
