/**
 * The client subcommands' own flags (`order place|cancel|amend|cancel-all`, `pair
 * halt|resume`, `book`, `result`, `events`), each command's as one zod schema, so every bad flag is named at once and the
 * help text lists the same defaults the schema applies.
 */
import { z } from "zod";

/** The pair precisions the bench's workloads use, and so the ones a first try should use. */
export const defaultPrecisions = { priceDecimals: 2, amountDecimals: 8, quoteDecimals: 8 };
export const defaultConductorUrl = "http://127.0.0.1:3002";
export const defaultUser = "cli";
export const defaultTimeoutMs = 30_000;

const decimal = z.string().regex(/^\d+(\.\d+)?$/, "not a plain decimal such as 100 or 0.5");
const whole = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, "not a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
const pair = whole(1, Number.MAX_SAFE_INTEGER);
const httpUrl = z
  .string()
  .refine((value) => /^https?:\/\/[^/]+/.test(value), "not an http:// URL")
  .transform((value) => value.replace(/\/+$/, ""));
const id = z.string().min(1).max(200);

/**
 * When a good-till-date order expires: epoch milliseconds, an ISO-8601 time, or `+N` with a
 * unit (ms, s, m, h, d) from the client's clock at parse time.
 */
/** `N` with a unit (ms, s, m, h, d) in milliseconds; undefined when the text is not one. */
function durationMs(text: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(text);
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  return match === null ? undefined : Number(match[1]) * units[match[2]!]!;
}

const expiry = z.string().transform((text, context) => {
  const ahead = text.startsWith("+") ? durationMs(text.slice(1)) : undefined;
  const ms = /^\d+$/.test(text)
    ? Number(text)
    : ahead !== undefined
      ? Date.now() + ahead
      : Date.parse(text);
  if (Number.isSafeInteger(ms) && ms >= 0) return ms;
  context.addIssue({
    code: "custom",
    message: "not a time: give epoch milliseconds, an ISO-8601 time or +N(ms|s|m|h|d)",
  });
  return z.NEVER;
});

const common = {
  "--json": z.boolean().default(false),
};
const rpc = {
  "--user": id.default(defaultUser),
  "--no-wait": z.boolean().default(false),
  "--timeout-ms": whole(100, 600_000).default(defaultTimeoutMs),
};

export const placeSchema = z
  .object({
    ...common,
    ...rpc,
    "--id": id.optional(),
    "--pair": pair,
    "--side": z.enum(["bid", "ask"]),
    "--type": z.enum(["limit", "market", "stop-limit", "stop-market"]).default("limit"),
    "--price": decimal.optional(),
    "--stop-price": decimal.optional(),
    "--volume": decimal.optional(),
    "--quote-volume": decimal.optional(),
    "--tif": z.enum(["gtc", "ioc", "fok", "gtd"]).optional(),
    "--expire-at": expiry.optional(),
    "--display-volume": decimal.optional(),
    "--post-only": z.boolean().default(false),
    "--stp": z.enum(["none", "cancel-taker", "cancel-maker", "cancel-both"]).optional(),
    "--price-decimals": whole(0, 18).default(defaultPrecisions.priceDecimals),
    "--amount-decimals": whole(0, 18).default(defaultPrecisions.amountDecimals),
    "--quote-decimals": whole(0, 18).default(defaultPrecisions.quoteDecimals),
  })
  .superRefine((o, context) => {
    const problem = (path: string, message: string) =>
      context.addIssue({ code: "custom", path: [path], message });
    const type = o["--type"];
    const stop = type === "stop-limit" || type === "stop-market";
    const market = type === "market" || type === "stop-market";
    if ((type === "limit" || type === "stop-limit") && o["--price"] === undefined)
      problem("--price", `a ${type} order needs --price`);
    if (o["--quote-volume"] === undefined && o["--volume"] === undefined)
      problem("--volume", "needs --volume (or --quote-volume for a market bid)");
    if (o["--quote-volume"] !== undefined && (!market || o["--side"] !== "bid"))
      problem("--quote-volume", "only a market or stop-market bid is sized by --quote-volume");
    if (o["--quote-volume"] !== undefined && o["--volume"] !== undefined)
      problem("--volume", "give --volume or --quote-volume, not both");
    if (market && o["--price"] !== undefined)
      problem("--price", `a ${type} order takes no --price (it trades at the makers' prices)`);
    if (stop && o["--stop-price"] === undefined)
      problem("--stop-price", `a ${type} order needs --stop-price`);
    if (!stop && o["--stop-price"] !== undefined)
      problem("--stop-price", "only stop-limit and stop-market orders take --stop-price");
    if (o["--tif"] === "gtd" && o["--expire-at"] === undefined)
      problem("--expire-at", "--tif gtd needs --expire-at");
    if (o["--expire-at"] !== undefined && (o["--tif"] ?? "gtd") !== "gtd")
      problem("--expire-at", "--expire-at makes a gtd order: leave out --tif or give gtd");
  });

export const cancelSchema = z.object({ ...common, ...rpc, "--pair": pair });

export const amendSchema = z
  .object({
    ...common,
    ...rpc,
    "--id": id,
    "--pair": pair,
    "--volume": decimal.optional(),
    "--price": decimal.optional(),
    "--stop-price": decimal.optional(),
  })
  .superRefine((o, context) => {
    if (
      o["--volume"] === undefined &&
      o["--price"] === undefined &&
      o["--stop-price"] === undefined
    )
      context.addIssue({
        code: "custom",
        path: ["--volume"],
        message: "an amend needs --volume (the new total), --price or --stop-price",
      });
  });

/**
 * `order oco`: a take-profit limit at --price and a stop at --stop-price (a stop-market, or a
 * stop-limit at --stop-limit-price), both on --side for --volume.
 */
export const ocoSchema = z.object({
  ...common,
  ...rpc,
  "--list-id": id.optional(),
  "--pair": pair,
  "--side": z.enum(["bid", "ask"]),
  "--volume": decimal,
  "--price": decimal,
  "--stop-price": decimal,
  "--stop-limit-price": decimal.optional(),
  "--expire-at": expiry.optional(),
  "--price-decimals": whole(0, 18).default(defaultPrecisions.priceDecimals),
  "--amount-decimals": whole(0, 18).default(defaultPrecisions.amountDecimals),
  "--quote-decimals": whole(0, 18).default(defaultPrecisions.quoteDecimals),
});

/** Without --pair: every pair of the partition (MATCHING_PARTITION, --partition). */
export const cancelAllSchema = z.object({
  ...common,
  ...rpc,
  // Required: cancelling every order of a default user by accident is too easy.
  "--user": id,
  "--pair": pair.optional(),
});

/**
 * A dead-man's switch timeout: 0 (disarm) or a whole number with a unit (ms, s, m, h);
 * the range is the engine's check.
 */
const timeout = z.string().transform((text, context) => {
  const ms = text === "0" ? 0 : durationMs(text);
  if (ms !== undefined) return ms;
  context.addIssue({ code: "custom", message: "not a timeout: 0, or e.g. 1500ms, 60s, 5m, 1h" });
  return z.NEVER;
});

/** `session cancel-after`: without --pair, every pair of the partition, as cancel-all. */
export const cancelAfterSchema = z.object({
  ...common,
  ...rpc,
  "--user": id,
  "--timeout": timeout,
  "--pair": pair.optional(),
});

/** `pair halt|resume`: the broker user of the URL sends it, so --user has no place here. */
export const pairSchema = z.object({
  ...common,
  "--no-wait": rpc["--no-wait"],
  "--timeout-ms": rpc["--timeout-ms"],
  "--pair": pair,
  "--reason": z.string().min(1).max(200, "at most 200 characters"),
});

export const bookSchema = z.object({
  ...common,
  "--depth": whole(1, 1000).default(10),
  "--conductor-url": httpUrl.default(defaultConductorUrl),
});

export const defaultFeedUrl = "http://127.0.0.1:3040";

export const watchSchema = z.object({
  "--depth": whole(1, 100).default(10),
  "--feed-url": httpUrl.default(defaultFeedUrl),
  "--once": z.boolean().default(false),
});

export const resultSchema = z.object({
  ...common,
  "--conductor-url": httpUrl.default(defaultConductorUrl),
});

export const eventsSchema = z.object({
  ...common,
  "--follow": z.boolean().default(false),
  "--pair": pair.optional(),
});

/** Every client command's flags, valued and switches apart, for the argument parser. */
export function flagsOf(schema: z.ZodType): { valued: string[]; switches: string[] } {
  const shape = shapeOf(schema);
  const valued: string[] = [];
  const switches: string[] = [];
  for (const [flag, field] of Object.entries(shape)) {
    (acceptsBoolean(field) ? switches : valued).push(flag);
  }
  return { valued, switches };
}

function shapeOf(schema: z.ZodType): Record<string, z.ZodType> {
  // A refined object is still a ZodObject underneath (zod 4 keeps refinements as checks).
  return (schema as unknown as z.ZodObject).shape as Record<string, z.ZodType>;
}

function acceptsBoolean(field: z.ZodType): boolean {
  return field.safeParse(true).success && !field.safeParse("x").success;
}

export type ParsedOptions<S extends z.ZodType> =
  | { ok: true; options: z.output<S> }
  | { ok: false; problems: string[] };

/** Flags and switches as the parser found them, validated by the command's schema. */
export function parseOptions<S extends z.ZodType>(
  schema: S,
  flags: ReadonlyMap<string, string>,
  switches: ReadonlySet<string>,
): ParsedOptions<S> {
  const input: Record<string, unknown> = Object.fromEntries(flags);
  for (const name of flagsOf(schema).switches) input[name] = switches.has(name);
  const parsed = schema.safeParse(input);
  if (parsed.success) return { ok: true, options: parsed.data };
  return {
    ok: false,
    problems: parsed.error.issues.map((issue) => {
      const flag = String(issue.path[0] ?? "");
      const given = flags.get(flag);
      // A flag left out fails its type or enum check: say what that means.
      const message = given === undefined && issue.code !== "custom" ? "required" : issue.message;
      return `${flag}: ${message}${given === undefined ? "" : ` (got ${JSON.stringify(given)})`}`;
    }),
  };
}
