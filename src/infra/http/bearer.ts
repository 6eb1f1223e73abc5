/**
 * The bearer token that guards the private queries (a user's orders, a command's result):
 * compared in constant time, so the answer's timing tells nothing of how much of a guess was
 * right, and never echoed.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";

/** Both sides hashed first: timingSafeEqual needs equal lengths, and a length is a hint too. */
const digestOf = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

export function bearerGuard(token: string): MiddlewareHandler {
  const expected = digestOf(token);
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    // The scheme's name is case-insensitive (RFC 7235); the token is not.
    const given = /^bearer /i.test(header) ? header.slice("bearer ".length) : "";
    if (!timingSafeEqual(digestOf(given), expected)) {
      return c.json(
        { error: "this query needs Authorization: Bearer <MATCHING_HTTP_TOKEN>" },
        401,
        {
          "www-authenticate": 'Bearer realm="matchd"',
        },
      );
    }
    await next();
  };
}

/** The request header that carries `token` (none when it is ""), for the private queries. */
export function bearerHeaders(token: string): Record<string, string> {
  return token === "" ? {} : { authorization: `Bearer ${token}` };
}
