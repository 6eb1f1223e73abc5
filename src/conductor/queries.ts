/**
 * Read-only HTTP queries of the conductor: aggregated book depth, stop levels and halt, and
 * the books' canonical digest (public market data), one resting or stop order and a
 * command's stored result (private: behind the bearer token when one is set; the stored
 * result resolves an ambiguous acknowledgement).
 */
import type { Context, Hono } from "hono";
import type { MatchingEngine } from "../domain/index";
import { bearerGuard } from "../infra/http/bearer";
import { DurabilityTimeoutError, PolicyViolatedError } from "../infra/valkey/durability";
import type { ConductorStore } from "./store";
import type { CommandTrace } from "./trace";

/**
 * Orders hashed in one step of GET /digest between yields to the event loop: 0.5-0.6 ms a
 * step here, 2.4 ms at most, over levels of 1,000 orders. Only levels changed since the last
 * digest are hashed (the books are hashed whole at load), so most digests take one step.
 */
export const digestStepOrders = 1000;

export function queryRoutes(
  engine: MatchingEngine,
  store: ConductorStore,
  /** False while the books are being (re)loaded: they may hold a failed batch's effects. */
  loaded: () => boolean,
  /** Under aof-replicated, how long a stored result may wait to be durable before it is shown. */
  durableWithinMs?: number,
  /** Required by the private queries (orders, command results, the trace) when not "". */
  token = "",
  trace?: CommandTrace,
  /** The dedup window, named in a 404: a result older than it has expired. */
  dedupWindowSeconds?: number,
) {
  // One computation at a time, shared by every request that comes while it runs.
  let digesting: Promise<string | null> | null = null;
  const currentDigest = (): Promise<string | null> => {
    digesting ??= digestInSteps(engine, loaded).finally(() => {
      digesting = null;
    });
    return digesting;
  };
  return (app: Hono): void => {
    if (token !== "") {
      for (const path of ["/orders/*", "/commands/*", "/trace"]) app.use(path, bearerGuard(token));
    }
    for (const path of ["/books/*", "/orders/*", "/digest"]) {
      app.use(path, async (c, next) => {
        if (!loaded()) return c.json({ error: "books are being reloaded from the datastore" }, 503);
        await next();
      });
    }
    app.get("/books/:pairId", (c) => bookDepth(c, engine));
    // Stage times of a sample of recent commands, for the bench's breakdown of the tail.
    app.get("/trace", (c) =>
      c.json({ sampleEvery: trace?.sampleEvery ?? 0, records: trace?.all() ?? [] }),
    );
    app.get("/digest", async (c) => {
      const digest = await currentDigest();
      if (digest === null) {
        return c.json({ error: "books are being reloaded from the datastore" }, 503);
      }
      return c.json({ digest, restingOrders: engine.restingOrderCount() });
    });
    app.get("/orders/:orderId", (c) => {
      const id = c.req.param("orderId");
      const order = engine.getOrder(id);
      if (order !== undefined) return c.json({ kind: "resting", ...order });
      const stop = engine.getStopOrder(id);
      if (stop !== undefined) return c.json({ kind: "stop", ...stop });
      return c.json({ error: "no resting or stop order with that id" }, 404);
    });
    app.get("/commands/:commandId", (c) =>
      storedResult(c, store, durableWithinMs, dedupWindowSeconds),
    );
  };
}

/** GET /books/:pairId?depth=N: the aggregated ladder, the stops and the halt of one pair. */
function bookDepth(c: Context, engine: MatchingEngine): Response {
  // Plain decimal digits only: Number() also takes "1e3", "0x10", " 1" and "1.0".
  const pairText = c.req.param("pairId") ?? "";
  const depthText = c.req.query("depth") ?? "10";
  const pairId = /^[1-9]\d{0,15}$/.test(pairText) ? Number(pairText) : Number.NaN;
  const depth = /^[1-9]\d{0,3}$/.test(depthText) ? Number(depthText) : Number.NaN;
  if (!Number.isSafeInteger(pairId) || pairId <= 0)
    return c.json({ error: "pairId must be a positive integer" }, 400);
  if (!Number.isSafeInteger(depth) || depth < 1 || depth > 1000) {
    return c.json({ error: "depth must be an integer 1..1000" }, 400);
  }
  const halt = engine.haltedPairs().find((h) => h.pairId === pairId);
  return c.json({
    pairId,
    ...engine.depth(pairId, depth),
    stops: engine.stopDepth(pairId, depth),
    halted: halt !== undefined,
    ...(halt === undefined ? {} : { haltReason: halt.reason }),
  });
}

/** GET /commands/:commandId: a command's stored result, shown only once durable. */
async function storedResult(
  c: Context,
  store: ConductorStore,
  durableWithinMs: number | undefined,
  dedupWindowSeconds: number | undefined,
): Promise<Response> {
  try {
    const stored = await store.storedResult(c.req.param("commandId") ?? "", durableWithinMs);
    if (stored === null)
      return c.json(
        {
          error: `no stored result: not processed (yet), or processed more than the dedup window (${dedupWindowSeconds ?? "?"} s) ago, so its result expired`,
          dedupWindowSeconds,
        },
        404,
      );
    return c.body(stored, 200, { "content-type": "application/json" });
  } catch (error) {
    if (error instanceof DurabilityTimeoutError || error instanceof PolicyViolatedError) {
      // Not confirmed fsynced on primary and replica (a replica that does not answer
      // leaves even an old result unconfirmed; a primary off `appendfsync always` cannot
      // confirm one): it could still be lost.
      return c.json({ error: `stored result not confirmed durable: ${error.message}` }, 503);
    }
    // The error's text names internal hosts and ports: not for whoever asks.
    return c.json({ error: "datastore unavailable" }, 503);
  }
}

/**
 * The digest, hashed in steps with a yield between them. The last step and the answer run in
 * one turn of the loop, so the digest is the books' state at one moment. Null when the books
 * began to reload meanwhile: they may hold a failed batch's effects.
 */
async function digestInSteps(
  engine: MatchingEngine,
  loaded: () => boolean,
): Promise<string | null> {
  while (!engine.digestStep(digestStepOrders)) {
    await new Promise((resolve) => setImmediate(resolve));
    if (!loaded()) return null;
  }
  return loaded() ? engine.digest() : null;
}
