/**
 * What a feed client may send, checked with zod: subscribe and unsubscribe to a pair's book
 * (at a depth), L3 or trades, optionally resuming from a sequence number, and ping.
 */

import { z } from "zod";
import { bookDepths } from "./messages";

const pairId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

const subscribe = z.strictObject({
  op: z.literal("subscribe"),
  channel: z.enum(["book", "l3", "trades"]),
  pairId,
  depth: z.literal(bookDepths).optional(),
  resumeFrom: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
});

const unsubscribe = z.strictObject({
  op: z.literal("unsubscribe"),
  channel: z.enum(["book", "l3", "trades"]),
  pairId,
  /** The book's depth; without it every depth of the pair's book. */
  depth: z.literal(bookDepths).optional(),
});

const ping = z.strictObject({ op: z.literal("ping") });

export const feedRequest = z.discriminatedUnion("op", [subscribe, unsubscribe, ping]);
export type FeedRequest = z.infer<typeof feedRequest>;

/** The request in `text`, or every problem with it in one sentence. */
export function parseRequest(
  text: string,
): { ok: true; request: FeedRequest } | { ok: false; error: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: "not JSON" };
  }
  const parsed = feedRequest.safeParse(value);
  if (parsed.success) return { ok: true, request: parsed.data };
  const problems = parsed.error.issues.map((issue) => {
    const where = issue.path.join(".");
    return where === "" ? issue.message : `${where}: ${issue.message}`;
  });
  return { ok: false, error: problems.join("; ") };
}
