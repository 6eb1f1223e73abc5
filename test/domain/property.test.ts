// Differential property test: random command streams go to the engine and to the naive reference
// book; after every step events (as JSON), results and digests must agree and check() must pass.
// A failure prints the seed; MATCHD_PROPERTY_SEED=<seed> replays it.

import { describe, expect, test } from "bun:test";
import DecimalJs from "decimal.js";
import fc from "fast-check";
import {
  type AmendOrderPayload,
  type BookChange,
  type CommandEnvelope,
  type CommandOutcome,
  type EventEnvelope,
  type HaltedPair,
  MatchingEngine,
  type PlaceOcoPayload,
  type PlaceOrderPayload,
  type RestingOrder,
  type StopOrder,
} from "../../src/domain/index";
import { assertProperty, propertySeed } from "../support/property";
import { tick } from "./helpers";
import {
  ENGINE_QUIRKS,
  MAX_CANCEL_AFTER,
  MAX_CANCEL_ALL,
  MAX_EXPIRIES,
  MAX_EXPIRY_AHEAD,
  MAX_TRIGGERED_STOPS,
  MIN_CANCEL_AFTER,
  type Quirk,
  ReferenceBook,
  type RefLiveOrder,
  type RefOutcome,
  type SessionChange,
} from "./reference-book";

const prices = ["9.5", "9.8", "10", "10", "10.1", "10.3", "10.5"];
const volumes = ["1", "2", "0.33", "0.5", "3", "1.25", "0.01", "5"];
const badDecimals = [
  "abc",
  "1e5",
  "-1",
  "",
  "1.",
  ".5",
  " 1",
  "10.123",
  "0",
  "9999999999999999",
  // Where the first problem decides the reason: a sign before an exponent or a point, two
  // signs, a second point before an exponent, a point first before an exponent.
  "-1e5",
  "-.5",
  "-1.",
  "--1",
  "1.2.3e",
  ".e5",
  "1.2.",
];
const users = ["u1", "u2", "u3"];
const stps = ["none", "none", "cancel-taker", "cancel-maker", "cancel-both"] as const;
/** Icebergs' volumes and displays: most show several parts, some refuse (not below). */
const icebergVolumes = ["5", "3", "2", "10", "1.25", "0.99", "4", "7.5"];
const displays = ["0.5", "1", "0.33", "0.01", "2", "0.25", "1.5", "0.1", "0.99"];
/**
 * A display for `volume`: at most 25 parts (a taker that sweeps them all costs one fill each),
 * but the smallest unit for a volume below 1 (99 parts).
 */
const displayFor = (volume: string, index: number) => {
  const display = displays[index % displays.length]!;
  if (display === "0.01") return Number(volume) < 1 ? display : "0.25";
  return Number(volume) / Number(display) > 25 ? "1" : display;
};
/** The big takers' volumes: several levels' worth. */
const bigVolumes = ["5", "8", "10", "3", "12"];
const reasons = ["maintenance", "audit", "x"];

/**
 * The highest op kind; kinds 0..22 are today's commands, 23..44 the commands of docs/orders.md,
 * 45..51 good-till-date orders and clock.tick, 52..55 the dead-man's switch (session.cancel-after,
 * ticks aimed at switches' deadlines, gtd orders due with a switch), 56..61 icebergs (placed,
 * good-till-date, refused, big takers that sweep several levels or fill-or-kill, amends and
 * cancels aimed at icebergs and linked legs), 62..64 one-cancels-other lists (placed, refused).
 */
const MAX_KIND = 64;

/** A realistic epoch (ms) the clock jumps to from 0, so deadlines are sized as in production. */
const T0 = 1_800_000_000_000;

const opArb = fc.record({
  kind: fc.integer({ min: 0, max: MAX_KIND }),
  side: fc.boolean(),
  price: fc.integer({ min: 0, max: prices.length - 1 }),
  volume: fc.integer({ min: 0, max: volumes.length - 1 }),
  user: fc.integer({ min: 0, max: users.length - 1 }),
  stp: fc.integer({ min: 0, max: stps.length - 1 }),
  ref: fc.nat(),
  bad: fc.integer({ min: 0, max: badDecimals.length - 1 }),
  pair: fc.integer({ min: 1, max: 3 }),
  // The stop price (an index into `prices`) and a free choice among a kind's variants.
  stop: fc.integer({ min: 0, max: prices.length - 1 }),
  alt: fc.nat({ max: 10_000 }),
});

/**
 * Each pair's precisions: pairs 1 and 2 round quotes (two quote decimals for one price and two
 * amount decimals), pair 3 quotes exactly (six quote decimals for two and three).
 */
const precisions = (pairId: number) =>
  pairId === 3
    ? { priceDecimals: 2, amountDecimals: 3, quoteDecimals: 6 }
    : { priceDecimals: 1, amountDecimals: 2, quoteDecimals: 2 };
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

const Decimal = DecimalJs.clone({ precision: 50 });

/** The same value written another way: "1" as "1.0", "0.5" as "0.50". */
const spelledOtherwise = (value: string) => (value.includes(".") ? `${value}0` : `${value}.0`);

/**
 * Turns abstract ops into concrete commands; `ids` collects every order id used so far, and
 * `book` (the reference, before the command) lets amends and cancels aim at live orders.
 */
function toCommand(
  op: Op,
  index: number,
  ids: string[],
  book: ReferenceBook,
): { command: CommandEnvelope; alreadyAccepted: boolean } {
  const commandId = `c${index}`;
  const base = {
    schemaVersion: 1 as const,
    commandId,
    correlationId: `r${index}`,
    submittedAt: `2024-01-01T00:00:${String(index % 60).padStart(2, "0")}.000Z`,
    pairId: op.pair,
    partition: 0,
  };
  const refId = ids.length > 0 ? ids[op.ref % ids.length]! : "missing";
  if (op.kind === 50 || op.kind === 51 || op.kind === 54) {
    const now = op.kind === 54 ? switchTickTime(op, book) : tickTime(op, book);
    return {
      command: {
        ...base,
        // As the conductor builds it: no pair, no correlation, submitted at its own time.
        correlationId: "",
        submittedAt: new Date(now).toISOString(),
        pairId: 0,
        type: "clock.tick",
        payload: { now },
      },
      alreadyAccepted: false,
    };
  }
  if (op.kind === 52 || op.kind === 53)
    return { command: cancelAfterOp(op, base, book), alreadyAccepted: false };
  if (op.kind === 17 || op.kind === 18) {
    const userId = op.kind === 18 ? users[op.user]! : "u1";
    return {
      command: { ...base, type: "order.cancel", payload: { id: refId, userId, pairId: op.pair } },
      // The shell's accepted-order marker, also for orders the engine no longer remembers.
      alreadyAccepted: op.side,
    };
  }
  if ((op.kind >= 29 && op.kind <= 37) || op.kind === 61) return liveCommand(op, base, refId, book);
  if (op.kind >= 62) return ocoCommand(op, index, base, ids, book);
  if (op.kind === 38 || op.kind === 39) {
    // Cancel-all: on one pair (one in eight naming another pair than the envelope's), or, one
    // in three of kind 39, the whole partition; otherwise of a user with nothing live.
    if (op.kind === 39 && op.alt % 3 === 0)
      return {
        command: { ...base, type: "order.cancel-all", payload: { userId: users[op.user]! } },
        alreadyAccepted: false,
      };
    const userId = op.kind === 39 ? "u4" : users[op.user]!;
    const pairId = op.alt % 8 === 0 ? (op.pair % 3) + 1 : op.pair;
    return {
      command: { ...base, type: "order.cancel-all", payload: { userId, pairId } },
      alreadyAccepted: false,
    };
  }
  if (op.kind >= 40 && op.kind <= 42) {
    // Halts are rarer than resumes, so a pair is halted about a sixth of the time; both meet
    // the other state often (a second halt, a resume of a running pair).
    const type = op.kind === 40 && op.alt % 2 === 0 ? "pair.halt" : "pair.resume";
    const pairId = op.alt % 10 === 1 ? (op.pair % 3) + 1 : op.pair;
    return {
      command: { ...base, type, payload: { pairId, reason: reasons[op.alt % reasons.length]! } },
      alreadyAccepted: false,
    };
  }
  const id = op.kind === 16 ? refId : `o${index}`;
  ids.push(id);
  const payload: PlaceOrderPayload = {
    id,
    userId: users[op.user]!,
    side: op.side ? "bid" : "ask",
    type: "limit",
    pairId: op.pair,
    timestamp: 1_000 + index,
    price: prices[op.price]!,
    volume: volumes[op.volume]!,
    volumeTotal: volumes[op.volume]!,
    quoteVolume: "0",
    ...precisions(op.pair),
    stp: stps[op.stp]!,
  };
  switch (op.kind) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 43:
    case 44:
      break; // plain GTC limit
    case 6:
      payload.timeInForce = "ioc";
      break;
    case 7:
      payload.timeInForce = "fok";
      break;
    case 8:
      payload.postOnly = true;
      break;
    case 9:
    case 10:
      payload.type = "market";
      payload.price = "0";
      break;
    case 11:
      payload.type = "market";
      payload.side = "bid";
      payload.price = "0";
      // One in five also names a base volume: refused by both books (two sizes at once).
      if (op.bad % 5 !== 0) {
        payload.volume = "0";
        payload.volumeTotal = "0";
      }
      payload.quoteVolume = ["10", "25.37", "0.07", "100"][op.volume % 4]!;
      break;
    case 12:
      payload.price = badDecimals[op.bad]!;
      break;
    case 13:
      payload.volume = badDecimals[op.bad]!;
      break;
    case 14:
      payload.amountDecimals = 3;
      break; // precision differs from the pair's resting orders
    case 15:
      payload.type = "market";
      payload.timeInForce = "fok";
      payload.price = "0";
      break;
    case 16:
      break; // re-uses an earlier id: a duplicate when that order was accepted
    case 20:
      // Post-only with a market order or a time in force: refused or never taking.
      payload.postOnly = true;
      if (op.side) {
        payload.type = "market";
        payload.price = "0";
      } else payload.timeInForce = op.bad % 2 === 0 ? "ioc" : "fok";
      break;
    case 21:
      // A quote-sized market bid with a time in force (FOK is refused as unsupported).
      payload.type = "market";
      payload.side = "bid";
      payload.price = "0";
      payload.volume = "0";
      payload.volumeTotal = "0";
      payload.quoteVolume = ["10", "2.5", "0.1", "100"][op.volume % 4]!;
      payload.timeInForce = op.bad % 2 === 0 ? "ioc" : "fok";
      break;
    case 22:
      // Already executed in part before this command (volume below volumeTotal).
      payload.volumeTotal = "9.99";
      break;
    case 19:
      return { command: { ...base, type: "order.place", payload }, alreadyAccepted: true };
    case 23:
    case 24:
      // A stop-limit near the traded prices, GTC mostly, sometimes IOC or FOK; one in six was
      // executed in part before (volume below volumeTotal).
      payload.type = "stop-limit";
      payload.stopPrice = prices[op.stop]!;
      if (op.alt % 4 === 2) payload.timeInForce = "ioc";
      if (op.alt % 4 === 3) payload.timeInForce = "fok";
      if (op.alt % 6 === 5) payload.volumeTotal = "9.99";
      break;
    case 25:
    case 26:
      payload.type = "stop-market";
      payload.price = op.alt % 5 === 0 ? "12.3" : "0"; // ignored, as a market order's is
      payload.stopPrice = prices[op.stop]!;
      if (op.alt % 4 === 3) payload.timeInForce = "fok";
      break;
    case 27:
      // A quote-sized stop-market bid; one in five with FOK (refused).
      payload.type = "stop-market";
      payload.side = "bid";
      payload.price = "0";
      payload.volume = "0";
      payload.volumeTotal = "0";
      payload.quoteVolume = ["10", "25.37", "0.07", "100"][op.volume % 4]!;
      payload.stopPrice = prices[op.stop]!;
      if (op.alt % 5 === 0) payload.timeInForce = "fok";
      break;
    case 45:
    case 46:
      // A good-till-date limit order (kind 46: post-only half the time); one in six was
      // executed in part before.
      payload.timeInForce = "gtd";
      payload.expireAt = deadline(op, book);
      if (op.kind === 46 && op.alt % 2 === 0) payload.postOnly = true;
      if (op.alt % 6 === 5) payload.volumeTotal = "9.99";
      break;
    case 47:
      // A good-till-date stop-limit.
      payload.type = "stop-limit";
      payload.stopPrice = prices[op.stop]!;
      payload.timeInForce = "gtd";
      payload.expireAt = deadline(op, book);
      if (op.alt % 6 === 5) payload.volumeTotal = "9.99";
      break;
    case 48:
      // A good-till-date stop-market, one in three a quote-sized bid.
      payload.type = "stop-market";
      payload.price = "0";
      payload.stopPrice = prices[op.stop]!;
      payload.timeInForce = "gtd";
      payload.expireAt = deadline(op, book);
      if (op.alt % 3 === 0) {
        payload.side = "bid";
        payload.volume = "0";
        payload.volumeTotal = "0";
        payload.quoteVolume = ["10", "25.37", "0.07", "100"][op.volume % 4]!;
      }
      break;
    case 49: {
      // gtd and expireAt that do not go together, and which check speaks first.
      const variant = op.alt % 9;
      payload.timeInForce = "gtd";
      payload.expireAt = deadline(op, book);
      if (variant === 0) delete payload.expireAt; // gtd needs expireAt
      if (variant === 1) delete payload.timeInForce; // expireAt needs gtd
      if (variant === 2) payload.timeInForce = op.side ? "ioc" : "fok";
      if (variant === 3 || variant === 4) {
        // A market order cannot be gtd; variant 4 a quote-sized bid.
        payload.type = "market";
        payload.price = "0";
        if (variant === 4) {
          payload.side = "bid";
          payload.volume = "0";
          payload.volumeTotal = "0";
          payload.quoteVolume = "10";
        }
      }
      if (variant === 5) {
        payload.type = "stop-limit"; // post-only cannot be a stop, gtd or not
        payload.stopPrice = prices[op.stop]!;
        payload.postOnly = true;
      }
      if (variant === 6) payload.amountDecimals = 3; // the pair's precisions differ too
      if (variant === 7) payload.price = badDecimals[op.bad]!; // a 2xx before the deadline
      if (variant === 8) payload.type = "stop-market"; // no stopPrice: bad-envelope first
      break;
    }
    case 55: {
      // A good-till-date order (one in three a stop-limit) due when an armed switch is, half
      // the time of the switch's own user: the switch goes first, and cancels it. With no
      // switch armed, due one to five seconds ahead, as switches are.
      const armed = book.switches();
      const one = armed.length > 0 ? armed[op.ref % armed.length] : undefined;
      payload.timeInForce = "gtd";
      payload.expireAt = one?.[1] ?? book.now() + MIN_CANCEL_AFTER + (op.ref % 4001);
      if (one && op.bad % 2 === 0) payload.userId = one[0];
      if (op.alt % 3 === 0) {
        payload.type = "stop-limit";
        payload.stopPrice = prices[op.stop]!;
      }
      break;
    }
    case 56:
    case 57:
    case 58: {
      // An iceberg: mostly a display well below its volume, so that it shows several parts;
      // kind 57 post-only half the time, or executed in part before; kind 58 good-till-date.
      payload.volume = icebergVolumes[op.volume]!;
      payload.volumeTotal = payload.volume;
      payload.displayVolume = displayFor(payload.volume, op.alt);
      if (op.kind === 57 && op.alt % 2 === 0) payload.postOnly = true;
      if (op.kind === 57 && op.alt % 2 === 1) payload.volumeTotal = "19.99";
      if (op.kind === 58) {
        payload.timeInForce = "gtd";
        payload.expireAt = deadline(op, book);
      }
      break;
    }
    case 59: {
      // Icebergs the checks refuse, and which check speaks first.
      const variant = op.alt % 10;
      payload.volume = icebergVolumes[op.volume]!;
      payload.volumeTotal = payload.volume;
      payload.displayVolume = "0.5";
      if (variant === 0) payload.displayVolume = payload.volume; // not below the volume
      if (variant === 1) payload.displayVolume = "11";
      if (variant === 2) payload.displayVolume = op.side ? "0" : "0.00"; // zero: 204
      if (variant === 3) payload.displayVolume = badDecimals[op.bad]!;
      if (variant === 4) payload.timeInForce = op.side ? "ioc" : "fok";
      if (variant === 5) {
        payload.type = "market";
        payload.price = "0";
      }
      if (variant === 6) {
        payload.type = op.side ? "stop-limit" : "stop-market";
        payload.stopPrice = prices[op.stop]!;
      }
      if (variant === 7) payload.displayVolume = "0.125"; // three decimals: only pair 3's
      if (variant === 8) payload.volume = badDecimals[op.bad]!; // the volume speaks first
      if (variant === 9) {
        // A quote-sized market bid: no volume to show part of.
        payload.type = "market";
        payload.side = "bid";
        payload.price = "0";
        payload.volume = "0";
        payload.volumeTotal = "0";
        payload.quoteVolume = "10";
      }
      break;
    }
    case 60:
      // A big taker at the far price: it sweeps several levels and reaches icebergs' hidden
      // parts; fill-or-kill, GTC or IOC.
      payload.price = op.side ? "10.5" : "9.5";
      payload.volume = bigVolumes[op.volume % bigVolumes.length]!;
      payload.volumeTotal = payload.volume;
      payload.timeInForce = (["fok", "gtc", "ioc"] as const)[op.alt % 3]!;
      break;
    case 28: {
      // Stops the checks refuse, and a stopPrice on a limit order (ignored).
      const variant = op.alt % 7;
      payload.type = variant === 6 ? "limit" : op.side ? "stop-limit" : "stop-market";
      payload.stopPrice = prices[op.stop]!;
      if (variant === 0) delete payload.stopPrice;
      if (variant === 1 || variant === 6) payload.stopPrice = badDecimals[op.bad]!;
      if (variant === 2) payload.postOnly = true;
      if (variant === 3) payload.stopPrice = "0";
      if (variant === 4) payload.stopPrice = "10.05"; // two decimals: only pair 3 takes them
      if (variant === 5) payload.price = badDecimals[op.bad]!; // price is checked first
      break;
    }
  }
  return { command: { ...base, type: "order.place", payload }, alreadyAccepted: false };
}

/**
 * An expireAt for a good-till-date order, against the reference's clock: mostly a few
 * milliseconds ahead (so the next ticks expire it), sometimes another live order's deadline
 * (a tie), the engine's time itself or before it (expiry-in-past), exactly 90 days ahead, or
 * past that (expiry-too-far). Drawn from `op.bad`, which gtd kinds do not otherwise use.
 */
function deadline(op: Op, book: ReferenceBook): number {
  const now = book.now();
  const live = book
    .liveOrders()
    .map((o) => o.expireAt)
    .filter((at): at is number => at !== undefined && at > now);
  switch (op.bad % 17) {
    case 10:
      return live.length > 0 ? live[op.ref % live.length]! : now + 1;
    case 11:
      return Math.max(0, now - (op.alt % 3) * 3); // not after now: 0 included
    case 12:
      return now + MAX_EXPIRY_AHEAD;
    case 13:
      return now + MAX_EXPIRY_AHEAD + 1 + (op.alt % 1000);
    case 14:
      return now + 1;
    case 15:
    case 16:
      return now + 50 + (op.alt % 500);
    default:
      return now + 1 + (op.alt % 40);
  }
}

/**
 * A clock.tick's `now`: mostly a small step forward (0 to 39 ms, so orders placed a few
 * milliseconds ahead expire), sometimes exactly a live deadline or one millisecond before it,
 * a step back (time must not move), the same time, a day ahead (from 0: to T0) or 90 days.
 */
function tickTime(op: Op, book: ReferenceBook): number {
  const now = book.now();
  const live = book
    .liveOrders()
    .map((o) => o.expireAt)
    .filter((at): at is number => at !== undefined);
  const aLive = live.length > 0 ? live[op.ref % live.length] : undefined;
  switch (op.alt % 12) {
    case 6:
      return aLive ?? now + 1;
    case 7:
      return aLive !== undefined ? Math.max(0, aLive - 1) : now;
    case 8:
      return Math.max(0, now - 1 - (op.ref % 50));
    case 9:
      return now === 0 ? T0 : now + 86_400_000;
    case 10:
      return now;
    case 11:
      return now + MAX_EXPIRY_AHEAD;
    default:
      return now + (op.ref % 40);
  }
}

/** Timeouts session.cancel-after refuses (212), after the two bounds' neighbours. */
const badTimeouts = [999, 86_400_001, 1, -1000, 1500.5, Number.NaN, 2 ** 53];

/**
 * Kinds 52, 53: a session.cancel-after of one of the users (kind 53: one in five of u4, who
 * has no orders): mostly 1 to 5 seconds (the same user's next one renews it), sometimes 0 or
 * -0 (disarm, armed or not), the bounds, another user's armed deadline (a tie, which user id
 * breaks), or a timeout out of range. Its envelope names a pair, one in eight a pair nobody
 * trades: it only names the partition.
 */
function cancelAfterOp(
  op: Op,
  base: Omit<CommandEnvelope, "type" | "payload">,
  book: ReferenceBook,
): CommandEnvelope {
  const userId = op.kind === 53 && op.alt % 5 === 0 ? "u4" : users[op.user]!;
  const variant = op.alt % 20;
  const now = book.now();
  const tie = book
    .switches()
    .map(([, at]) => at - now)
    .filter((timeout) => timeout >= MIN_CANCEL_AFTER);
  let timeoutMs = MIN_CANCEL_AFTER + (op.ref % 4001);
  if (variant >= 12 && variant <= 14) timeoutMs = op.side ? 0 : -0;
  if (variant === 15) timeoutMs = op.side ? MIN_CANCEL_AFTER : MAX_CANCEL_AFTER;
  if ((variant === 16 || variant === 17) && tie.length > 0) timeoutMs = tie[op.ref % tie.length]!;
  if (variant >= 18) timeoutMs = badTimeouts[op.ref % badTimeouts.length]!;
  return {
    ...base,
    pairId: op.alt % 8 === 7 ? 9 : op.pair,
    type: "session.cancel-after",
    payload: { userId, timeoutMs },
  };
}

/**
 * Kind 54, a clock.tick's `now` aimed at the switches: exactly an armed switch's deadline, or
 * one millisecond before it, just past every armed one, the same time, or a step of one to
 * five seconds (the switches' timeouts).
 */
function switchTickTime(op: Op, book: ReferenceBook): number {
  const now = book.now();
  const armed = book.switches().map(([, at]) => at);
  const one = armed.length > 0 ? armed[op.ref % armed.length] : undefined;
  switch (op.alt % 6) {
    case 0:
    case 1:
      return one ?? now + MIN_CANCEL_AFTER + (op.ref % 4001);
    case 2:
      return one !== undefined ? Math.max(0, one - 1) : now;
    case 3:
      return armed.length > 0 ? Math.max(...armed) + (op.ref % 3) : now;
    case 4:
      return now;
    default:
      return now + MIN_CANCEL_AFTER + (op.ref % 4001);
  }
}

/**
 * Kinds 29..37: amends and cancels, mostly of live orders and stops. Kind 61: of icebergs and
 * linked legs (when there are any), a cancel one in three.
 */
function liveCommand(
  op: Op,
  base: Omit<CommandEnvelope, "type" | "payload">,
  refId: string,
  book: ReferenceBook,
): { command: CommandEnvelope; alreadyAccepted: boolean } {
  const live = book.liveOrders();
  const stops = live.filter((o) => o.kind !== "limit");
  const postOnly = live.filter((o) => o.postOnly);
  const gtd = live.filter((o) => o.expireAt !== undefined);
  const icebergs = live.filter((o) => o.displayVolume !== undefined);
  const legs = live.filter((o) => o.linkedOrderId !== undefined);
  const aimed = (op.stop % 2 === 0 && legs.length > 0) || icebergs.length === 0 ? legs : icebergs;
  // One in three aims at a stop when there is one, one in six at a post-only order, one in six
  // at a good-till-date order or stop; kind 37 at any id used so far.
  const pool =
    op.kind === 61 && aimed.length > 0
      ? aimed
      : op.ref % 3 === 0 && stops.length > 0
        ? stops
        : op.ref % 6 === 1 && postOnly.length > 0
          ? postOnly
          : op.ref % 6 === 2 && gtd.length > 0
            ? gtd
            : live;
  const target: RefLiveOrder | undefined =
    op.kind === 37 || pool.length === 0 ? undefined : pool[op.ref % pool.length];
  const id = target?.id ?? refId;
  const pairId = target?.pairId ?? op.pair;
  const userId = target?.userId ?? users[op.user]!;
  const envelope = { ...base, pairId };
  if (op.kind === 36 || (op.kind === 61 && op.stop % 3 === 0)) {
    const owner = op.alt % 4 === 0 ? users[op.user]! : userId;
    return {
      command: { ...envelope, type: "order.cancel", payload: { id, userId: owner, pairId } },
      alreadyAccepted: false,
    };
  }
  const payload: AmendOrderPayload = { id, userId, pairId };
  const volume = volumes[op.volume]!;
  const price = prices[op.price]!;
  const executed = new Decimal(target?.executed ?? "0");
  const oppositeBest = target
    ? book.bestPrice(pairId, target.side === "bid" ? "ask" : "bid")
    : undefined;
  const variant = op.alt % 17;
  switch (variant) {
    case 0:
      payload.volume = volume; // reduces, grows, or falls below the executed part
      break;
    case 1:
      payload.volume = executed.plus(volume).toFixed();
      break;
    case 2:
      payload.volume = executed.toFixed(); // to the executed part ("0" when none)
      break;
    case 3:
      payload.volume = executed.minus("0.01").toFixed();
      break;
    case 4:
      // Unchanged, in every value it names.
      payload.volume = target?.volumeTotal ?? volume;
      if (op.side && target && target.kind !== "stop-market") payload.price = target.price;
      if (op.side && target?.stopPrice !== undefined) payload.stopPrice = target.stopPrice;
      break;
    case 5:
      payload.volume = spelledOtherwise(target?.volumeTotal ?? volume);
      if (target?.stopPrice !== undefined) payload.stopPrice = spelledOtherwise(target.stopPrice);
      break;
    case 6:
      payload.price = price;
      break;
    case 7:
      // Onto the best opposite price (crossing), or past it.
      payload.price = op.side ? (oppositeBest ?? price) : price;
      break;
    case 8:
      payload.price = oppositeBest ?? price;
      payload.volume = volume;
      break;
    case 9:
      payload.stopPrice = prices[op.stop]!;
      break;
    case 10:
      payload.stopPrice = prices[op.stop]!;
      payload.price = price;
      break;
    case 11:
      payload.volume = volume;
      payload.stopPrice = prices[op.stop]!;
      break;
    case 12: {
      const field = (["volume", "price", "stopPrice"] as const)[op.ref % 3]!;
      payload[field] = badDecimals[op.bad]!;
      // A good price beside a bad volume or stopPrice: the decimal problem is still named.
      if (op.side && field !== "price") payload.price = price;
      break;
    }
    case 13:
      break; // names nothing
    case 14:
      payload.price = price;
      if (op.side)
        payload.userId = users[op.user]!; // maybe another user's
      else payload.pairId = (pairId % 3) + 1; // the payload names another pair
      break;
    case 15:
      payload.price = "10.05"; // two decimals: only pair 3 takes them
      break;
    case 16:
      // The price stays, the volume goes down a little: priority kept.
      payload.volume = Decimal.max(
        executed.plus("0.01"),
        new Decimal(target?.volumeTotal ?? volume).minus("0.5"),
      ).toFixed();
      if (target && target.kind !== "stop-market") payload.price = target.price;
      break;
  }
  // Kind 61, half the time at a list's leg: a new price onto the best opposite one (a limit
  // leg re-matches and trades), or down to its executed volume (it finishes).
  if (op.kind === 61 && target?.linkedOrderId !== undefined && op.ref % 2 === 0) {
    delete payload.volume;
    delete payload.stopPrice;
    delete payload.price;
    if (target.kind === "limit" && op.side) payload.price = oppositeBest ?? price;
    else payload.volume = executed.toFixed();
  }
  return {
    command: { ...envelope, type: "order.amend", payload },
    alreadyAccepted: target === undefined && op.side,
  };
}

/**
 * Kinds 62, 63: an order.place-oco of one user on one pair, of many shapes: a take-profit limit
 * with a stop-loss stop on one side (either first), two limits on opposite sides (apart, or
 * crossing each other or the book), two limits on one side, an iceberg leg, two stops (one
 * never reached), post-only
 * legs; a leg may trade on arrival, be good-till-date, executed in part before, or (a stop-market
 * bid) quote-sized. Kind 64: lists the checks refuse, and which check speaks first.
 */
function ocoCommand(
  op: Op,
  index: number,
  base: Omit<CommandEnvelope, "type" | "payload">,
  ids: string[],
  book: ReferenceBook,
): { command: CommandEnvelope; alreadyAccepted: boolean } {
  const userId = users[op.user]!;
  const side = op.side ? "bid" : "ask";
  const opposite = op.side ? "ask" : "bid";
  const leg = (suffix: string, extra: Partial<PlaceOrderPayload>): PlaceOrderPayload => ({
    id: `o${index}${suffix}`,
    userId,
    side,
    type: "limit",
    pairId: op.pair,
    timestamp: 1_000 + index,
    price: prices[op.price]!,
    volume: volumes[op.volume]!,
    volumeTotal: volumes[op.volume]!,
    quoteVolume: "0",
    ...precisions(op.pair),
    stp: stps[op.stp]!,
    ...extra,
  });
  const stopLeg = (suffix: string, legSide: "bid" | "ask", stopPrice: string) =>
    op.bad % 2 === 0
      ? leg(suffix, { side: legSide, type: "stop-market", price: "0", stopPrice })
      : leg(suffix, { side: legSide, type: "stop-limit", price: stopPrice, stopPrice });
  const other = volumes[op.ref % volumes.length]!;
  const variant = op.alt % 8;
  let a: PlaceOrderPayload;
  let b: PlaceOrderPayload;
  switch (variant) {
    case 0:
    case 1: {
      // A take-profit limit and a stop-loss stop on one side; the limit may trade at once.
      a = leg("a", {});
      b = stopLeg("b", side, prices[op.stop]!);
      if (side === "bid" && b.type === "stop-market" && op.ref % 5 === 0) {
        b = { ...b, volume: "0", volumeTotal: "0", quoteVolume: "25.37" };
      }
      if (variant === 1) [a, b] = [b, a];
      break;
    }
    case 2:
      // Two limits on opposite sides of the price, apart.
      a = leg("a", { side: "bid", price: prices[op.price % 3]! });
      b = leg("b", {
        side: "ask",
        price: prices[4 + (op.stop % 3)]!,
        volume: other,
        volumeTotal: other,
      });
      if (op.side) [a, b] = [b, a];
      break;
    case 3:
      // Two limits on opposite sides anywhere: crossing each other or the book.
      a = leg("a", {});
      b = leg("b", { side: opposite, price: prices[op.stop]!, volume: other, volumeTotal: other });
      break;
    case 4:
      // Two limits on one side: a taker may reach both, but fills one.
      a = leg("a", {});
      b = leg("b", { price: prices[op.stop]!, volume: other, volumeTotal: other });
      break;
    case 5: {
      // An iceberg leg, with a stop or a limit on the other side.
      const volume = icebergVolumes[op.volume]!;
      a = leg("a", { volume, volumeTotal: volume, displayVolume: displayFor(volume, op.ref % 4) });
      b =
        op.ref % 2 === 0
          ? stopLeg("b", side, prices[op.stop]!)
          : leg("b", {
              side: opposite,
              price: prices[op.stop]!,
              volume: other,
              volumeTotal: other,
            });
      if (op.stop % 3 === 0) [a, b] = [b, a];
      break;
    }
    case 6: {
      // Two stops, one reached by the traded prices, the other never (a sell stop at 1, a buy
      // stop at 99).
      a = stopLeg("a", side, prices[op.stop]!);
      b = stopLeg("b", opposite, opposite === "bid" ? "99" : "1");
      if (op.ref % 2 === 0) [a, b] = [b, a];
      break;
    }
    default:
      // Post-only legs: either may be refused for taking, the second by crossing the first.
      a = leg("a", { postOnly: true });
      b = leg("b", { side: opposite, price: prices[op.stop]!, postOnly: op.ref % 2 === 0 });
      break;
  }
  // Good-till-date legs, one or both; a leg executed in part before.
  const gtd = op.bad % 4;
  if (gtd === 0 || gtd === 2) a = { ...a, timeInForce: "gtd", expireAt: deadline(op, book) };
  if (gtd === 1 || gtd === 2) b = { ...b, timeInForce: "gtd", expireAt: deadline(op, book) };
  if (op.ref % 7 === 0 && a.type !== "stop-market") a = { ...a, volumeTotal: "19.99" };
  let legs = [a, b];
  let payload: PlaceOcoPayload = { listId: `l${index}`, userId, pairId: op.pair, legs };
  let pairId = op.pair;
  let alreadyAccepted = false;
  if (op.kind === 64) {
    const refId = ids.length > 0 ? ids[op.ref % ids.length]! : "missing";
    switch (op.alt % 15) {
      case 0:
        legs = [a];
        break;
      case 1:
        legs = [a, b, leg("c", {})];
        break;
      case 2:
        legs = [a, { ...b, id: a.id }];
        break;
      case 3:
        legs = [a, { ...b, userId: users[(op.user + 1) % users.length]! }];
        break;
      case 4:
        legs = [a, { ...b, pairId: (op.pair % 3) + 1 }];
        break;
      case 5:
        legs = [a, { ...b, type: "market", price: "0" }];
        break;
      case 6:
        legs = [
          { ...a, type: "limit", price: prices[op.price]!, timeInForce: op.side ? "ioc" : "fok" },
          b,
        ];
        delete legs[0]!.expireAt;
        break;
      case 7:
        legs = [a, { ...b, stp: a.stp === "none" ? "cancel-both" : "none" }];
        break;
      case 8:
        legs = [a, { ...b, amountDecimals: a.amountDecimals + 1 }];
        break;
      case 9:
        // The envelope names another pair than the payload and its legs.
        pairId = (op.pair % 3) + 1;
        break;
      case 10:
        // A bad leg, either one: the list is refused naming it, nothing placed.
        legs = op.side
          ? [a, { ...b, price: badDecimals[op.bad]! }]
          : [{ ...a, volume: badDecimals[op.bad]! }, b];
        break;
      case 11:
        legs = [a, { ...b, timeInForce: "gtd", expireAt: book.now() }]; // expiry-in-past
        break;
      case 12:
        // An id used before: a duplicate when it was accepted (or the shell's marker says so).
        legs = op.side ? [a, { ...b, id: refId }] : [{ ...a, id: refId }, b];
        alreadyAccepted = op.stop % 4 === 0;
        break;
      case 13:
        // An iceberg leg the checks refuse: on a stop, or not below its volume.
        legs = [{ ...a, displayVolume: a.type === "limit" ? a.volume : "0.5" }, b];
        break;
      default:
        // Other precisions than the pair's orders: each leg's own, both refused at the first.
        legs = [a, b].map((l) => ({ ...l, amountDecimals: 3, priceDecimals: 2, quoteDecimals: 6 }));
        break;
    }
    payload = { listId: `l${index}`, userId, pairId: op.pair, legs };
  }
  for (const l of legs) ids.push(l.id);
  return {
    command: { ...base, pairId, type: "order.place-oco", payload },
    alreadyAccepted,
  };
}

/** The state the outcomes' changes describe, which the conductor writes. */
class Mirror {
  orders = new Map<string, RestingOrder>();
  stops = new Map<string, StopOrder>();
  halts = new Map<number, string>();
  switches = new Map<string, number>();
  sweeps = new Map<string, number>();

  apply(changes: BookChange[]): void {
    for (const change of changes) {
      switch (change.op) {
        case "put":
          this.orders.set(change.order.id, change.order);
          break;
        case "remove":
          expect(this.orders.delete(change.order.id)).toBe(true);
          break;
        case "stop-put":
          this.stops.set(change.stop.id, change.stop);
          break;
        case "stop-remove":
          expect(this.stops.delete(change.stop.id)).toBe(true);
          break;
        case "halt":
          expect(this.halts.has(change.pairId)).toBe(false);
          this.halts.set(change.pairId, change.reason);
          break;
        case "resume":
          expect(this.halts.delete(change.pairId)).toBe(true);
          break;
        case "switch-put":
          this.switches.set(change.userId, change.deadline);
          break;
        case "switch-remove":
          expect(this.switches.delete(change.userId)).toBe(true);
          break;
        case "sweep-put":
          this.sweeps.set(change.userId, change.deadline);
          break;
        case "sweep-remove":
          expect(this.sweeps.delete(change.userId)).toBe(true);
          break;
      }
    }
  }

  haltedPairs(): HaltedPair[] {
    return [...this.halts]
      .sort(([a], [b]) => a - b)
      .map(([pairId, reason]) => ({ pairId, reason }));
  }

  /** The engine's own views equal what its changes said. */
  expectMatches(engine: MatchingEngine): void {
    const resting = [...engine.restingOrders()];
    expect(resting.length).toBe(this.orders.size);
    for (const order of resting)
      expect(JSON.stringify(order)).toBe(JSON.stringify(this.orders.get(order.id)));
    const stops = [...engine.stopOrders()];
    expect(stops.length).toBe(this.stops.size);
    for (const stop of stops)
      expect(JSON.stringify(stop)).toBe(JSON.stringify(this.stops.get(stop.id)));
    expect(engine.haltedPairs()).toEqual(this.haltedPairs());
    expect(byUser(engine.switches())).toEqual(byUser(this.switches));
    expect(byUser(engine.sweeps())).toEqual(byUser(this.sweeps));
  }

  /** A fresh engine loaded from the mirror, each kind in reverse (priority from sequences). */
  load(): MatchingEngine {
    const engine = new MatchingEngine();
    for (const order of [...this.orders.values()].reverse()) engine.loadRestingOrder(order);
    for (const stop of [...this.stops.values()].reverse()) engine.loadStopOrder(stop);
    for (const halt of this.haltedPairs().reverse()) engine.loadHalt(halt.pairId, halt.reason);
    for (const [userId, deadline] of byUser(this.switches).reverse())
      engine.loadSwitch(userId, deadline);
    for (const [userId, deadline] of byUser(this.sweeps).reverse())
      engine.loadSweep(userId, deadline);
    return engine;
  }
}

/** Switches or sweeps as [userId, deadline] pairs, by user id. */
const byUser = (entries: Iterable<[string, number]>): [string, number][] =>
  [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** The switch and sweep changes among an outcome's changes, in their order. */
const sessionChanges = (changes: BookChange[]): SessionChange[] =>
  changes.filter((c): c is SessionChange => c.op.startsWith("switch") || c.op.startsWith("sweep"));

/**
 * The engine's switches and sweeps against the reference's, and the changes that described
 * them (which the reference models, unlike the book changes).
 */
function expectSameSessions(
  engine: MatchingEngine,
  reference: ReferenceBook,
  changes: BookChange[],
  expected: RefOutcome,
): void {
  expect(sessionChanges(changes)).toEqual(expected.sessionChanges ?? []);
  expect(byUser(engine.switches())).toEqual(reference.switches());
  expect(byUser(engine.sweeps())).toEqual(reference.sweeps());
}

/** The order ids a command names: a place's, cancel's or amend's, a list's two legs. */
const orderIdsOf = (command: CommandEnvelope): string[] =>
  command.type === "order.place-oco"
    ? command.payload.legs.map((leg) => leg.id)
    : "id" in command.payload
      ? [command.payload.id]
      : [];

/** The shell's accepted-order marker: any order id the command names was accepted before. */
const markerOf = (command: CommandEnvelope, accepted: Set<string>): boolean =>
  orderIdsOf(command).some((id) => accepted.has(id));

/** What the shell marks accepted after a command: the order, and a list's other leg. */
function markAccepted(accepted: Set<string>, outcome: CommandOutcome): void {
  if (outcome.acceptedOrderId !== undefined) accepted.add(outcome.acceptedOrderId);
  if (outcome.alsoAcceptedOrderId !== undefined) accepted.add(outcome.alsoAcceptedOrderId);
}

test(`engine agrees with the reference book (seed ${propertySeed})`, () => {
  assertProperty(
    "property test",
    fc.property(fc.array(opArb, { minLength: 1, maxLength: 150, size: "max" }), (ops) => {
      const engine = new MatchingEngine();
      const reference = new ReferenceBook({ quirks: ENGINE_QUIRKS });
      const ids: string[] = [];
      const mirror = new Mirror();
      ops.forEach((op, index) => {
        const { command, alreadyAccepted } = toCommand(op, index, ids, reference);
        const actual = engine.apply(command, alreadyAccepted);
        const expected = reference.apply(command, alreadyAccepted);
        expect(JSON.stringify(actual.events)).toBe(JSON.stringify(expected.events));
        expect(actual.result).toEqual(expected.result);
        // The book's depth sees only what icebergs show (checked where icebergs are made, met
        // by big takers, amended or cancelled).
        if (op.kind >= 56 && op.kind <= 61 && command.pairId >= 1 && command.pairId <= 3)
          expect(engine.depth(command.pairId, 100)).toEqual(reference.depth(command.pairId));
        engine.check();
        engine.checkDigest();
        expect(engine.digest()).toBe(reference.digest());
        expect(engine.restingOrderCount()).toBe(reference.restingCount());
        expect(engine.stopOrderCount()).toBe(reference.stopCount());
        expect(engine.now()).toBe(reference.now());
        expect(engine.nextExpiry()).toBe(reference.nextExpiry());
        expectSameSessions(engine, reference, actual.changes, expected);
        mirror.apply(actual.changes);
        mirror.expectMatches(engine);
      });
    }),
    300,
  );
});

/**
 * The conductor's reload, at the domain's level: at random points the engine is replaced by a
 * fresh one loaded from the resting orders (icebergs with their hidden parts, lists' legs with
 * their links), stops, halts, dead-man's switches and unfinished sweeps its changes described
 * (in reverse, so priority and arrival must come from the sequence numbers, not the load
 * order), and it forgets every finished id, so, as the conductor does with its stored markers,
 * each command says whether its order ids were accepted before. Events, results and digests
 * must still agree
 * with the reference book, which never reloads.
 */
test(`an engine reloaded from its changes agrees with the reference book (seed ${propertySeed})`, () => {
  assertProperty(
    "reload property test",
    fc.property(
      fc.array(opArb, { minLength: 1, maxLength: 150, size: "max" }),
      fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
      (ops, reloadPoints) => {
        let engine = new MatchingEngine();
        const reference = new ReferenceBook({ quirks: ENGINE_QUIRKS });
        const ids: string[] = [];
        const accepted = new Set<string>();
        const mirror = new Mirror();
        const reloadAt = new Set(reloadPoints.map((point) => point % ops.length));
        let reloads = 0;
        ops.forEach((op, index) => {
          if (reloadAt.has(index)) {
            const time = engine.now();
            // What the changes stored is what the engine held, switches and sweeps included.
            mirror.expectMatches(engine);
            engine = mirror.load();
            // The conductor restores the time its last batch recorded.
            engine.loadClock(time);
            engine.check();
            engine.checkDigest();
            expect(engine.digest()).toBe(reference.digest());
            mirror.expectMatches(engine);
            expect(engine.nextExpiry()).toBe(reference.nextExpiry());
            reloads++;
          }
          const { command, alreadyAccepted } = toCommand(op, index, ids, reference);
          const marker = alreadyAccepted || markerOf(command, accepted);
          const actual = engine.apply(command, marker);
          const expected = reference.apply(command, marker);
          expect(JSON.stringify(actual.events)).toBe(JSON.stringify(expected.events));
          expect(actual.result).toEqual(expected.result);
          engine.check();
          engine.checkDigest();
          expect(engine.digest()).toBe(reference.digest());
          expectSameSessions(engine, reference, actual.changes, expected);
          markAccepted(accepted, actual);
          mirror.apply(actual.changes);
        });
        expect(reloads).toBe(reloadAt.size);
      },
    ),
    200,
  );
});

// --- the reference alone, against docs/orders.md ------------------------------------------

let step = 0;
const envelope = (pairId = 1) => {
  step++;
  return {
    schemaVersion: 1 as const,
    commandId: `s${step}`,
    correlationId: `s${step}`,
    submittedAt: "2024-01-01T00:00:00.000Z",
    pairId,
    partition: 0,
  };
};
const limit = (
  id: string,
  userId: string,
  side: "bid" | "ask",
  price: string,
  volume: string,
  extra: Partial<PlaceOrderPayload> = {},
): CommandEnvelope => ({
  ...envelope(extra.pairId),
  type: "order.place",
  payload: {
    id,
    userId,
    side,
    type: "limit",
    pairId: 1,
    timestamp: 5_000 + step,
    price,
    volume,
    volumeTotal: volume,
    quoteVolume: "0",
    ...precisions(1),
    ...extra,
  },
});
const stopMarket = (
  id: string,
  userId: string,
  side: "bid" | "ask",
  stop: string,
  volume: string,
) => limit(id, userId, side, "0", volume, { type: "stop-market", stopPrice: stop });
const amend = (payload: Omit<AmendOrderPayload, "pairId">): CommandEnvelope => ({
  ...envelope(),
  type: "order.amend",
  payload: { ...payload, pairId: 1 },
});
const types = (events: EventEnvelope[]) => events.map((e) => e.type);
const ofType = (events: EventEnvelope[], type: string) =>
  events.filter((e) => e.type === type).map((e) => e.payload);

describe("the reference book follows docs/orders.md", () => {
  test("a stop triggers at exactly its stop price, not a tick before", () => {
    const book = new ReferenceBook();
    book.apply(limit("a1", "u1", "ask", "10", "2"));
    book.apply(limit("a2", "u1", "ask", "10.1", "2"));
    const s1 = book.apply(stopMarket("s1", "u2", "bid", "10", "0.5"));
    expect(s1.result).toEqual({
      commandId: s1.result.commandId,
      status: "accepted",
      code: 106,
      codeName: "stop-accepted",
      orderId: "s1",
      orderStatus: "stop-accepted",
      executedVolume: "0",
      remainingVolume: "0.5",
      events: 1,
    });
    expect(s1.events[0]!.payload).toEqual({
      orderId: "s1",
      userId: "u2",
      pairId: 1,
      side: "bid",
      type: "stop-market",
      price: "0",
      stopPrice: "10",
      volume: "0.5",
      volumeTotal: "0.5",
      quoteVolume: "0",
      timeInForce: "gtc",
      stp: "none",
      timestamp: s1.events[0]!.payload.timestamp,
    });
    book.apply(stopMarket("s2", "u2", "bid", "10.1", "1"));
    book.apply(stopMarket("s3", "u2", "ask", "10", "1")); // a sell stop: at or below 10
    const t = book.apply(limit("t1", "u3", "bid", "10", "1"));
    expect(types(t.events)).toEqual([
      "order.updated.v1",
      "order.filled.v1",
      "deal.executed.v1",
      "order.triggered.v1", // s1 (bid, 10 <= 10)
      "order.triggered.v1", // s3 (ask, 10 >= 10), arrived after s1 at the same distance
      "order.updated.v1", // s1 buys 0.5 of a1
      "order.filled.v1",
      "deal.executed.v1",
      "order.cancelled.v1", // s3, a market ask, meets an empty bid side
    ]);
    const triggered = ofType(t.events, "order.triggered.v1");
    expect(triggered.map((p) => p.orderId)).toEqual(["s1", "s3"]);
    expect(triggered[0]).toEqual({
      orderId: "s1",
      userId: "u2",
      pairId: 1,
      side: "bid",
      type: "stop-market",
      price: "0",
      stopPrice: "10",
      volume: "0.5",
      volumeTotal: "0.5",
      triggerPrice: "10",
    });
    // The taker's own phase, plus the count.
    expect(t.result).toMatchObject({ code: 102, executedVolume: "1", triggeredStops: 2 });
    expect(t.result.events).toBe(t.events.length);
    expect(book.stopCount()).toBe(1); // s2 at 10.1 waits
  });

  test("a cascade: each triggered stop's trades trigger the next", () => {
    const book = new ReferenceBook();
    book.apply(limit("a1", "u1", "ask", "10", "1"));
    book.apply(limit("a2", "u1", "ask", "10.1", "1"));
    book.apply(limit("a3", "u1", "ask", "10.3", "1"));
    book.apply(stopMarket("s1", "u2", "bid", "10", "1"));
    book.apply(stopMarket("s2", "u2", "bid", "10.1", "1"));
    book.apply(limit("s3", "u2", "bid", "10.3", "1", { type: "stop-limit", stopPrice: "10.3" }));
    const t = book.apply(limit("t1", "u3", "bid", "10", "0.5"));
    expect(ofType(t.events, "order.triggered.v1").map((p) => [p.orderId, p.triggerPrice])).toEqual([
      ["s1", "10"],
      ["s2", "10.1"],
      ["s3", "10.3"],
    ]);
    expect(ofType(t.events, "deal.executed.v1").map((p) => [p.takerOrderId, p.price])).toEqual([
      ["t1", "10"],
      ["s1", "10"],
      ["s1", "10.1"],
      ["s2", "10.1"],
      ["s2", "10.3"],
      ["s3", "10.3"],
    ]);
    // s3, a GTC stop-limit, rests its remainder with the stop's timestamp.
    expect(t.events.at(-1)).toMatchObject({
      type: "order.rested.v1",
      payload: { orderId: "s3", volume: "0.5", executedVolume: "0.5" },
    });
    expect(t.result).toMatchObject({ code: 102, triggeredStops: 3 });
  });

  test("stops that trigger together go by distance from the last trade, then arrival", () => {
    const book = new ReferenceBook();
    book.apply(limit("a1", "u1", "ask", "10", "1"));
    book.apply(stopMarket("far", "u2", "bid", "9.5", "1"));
    book.apply(stopMarket("near", "u2", "bid", "10", "1"));
    book.apply(stopMarket("mid", "u2", "ask", "10.3", "1"));
    book.apply(stopMarket("near2", "u3", "ask", "10", "1"));
    const t = book.apply(limit("t1", "u3", "bid", "10", "1"));
    expect(ofType(t.events, "order.triggered.v1").map((p) => p.orderId)).toEqual([
      "near",
      "near2",
      "mid",
      "far",
    ]);
  });

  test("at most 64 stops trigger in one command; the rest stay armed", () => {
    const book = new ReferenceBook();
    book.apply(limit("a0", "u1", "ask", "10", "1"));
    for (let i = 0; i < 70; i++) book.apply(stopMarket(`s${i}`, "u2", "bid", "9.5", "1"));
    const t = book.apply(limit("t1", "u3", "bid", "10", "1"));
    expect(t.result.triggeredStops).toBe(MAX_TRIGGERED_STOPS);
    expect(book.stopCount()).toBe(70 - MAX_TRIGGERED_STOPS);
    expect(ofType(t.events, "order.triggered.v1")[0]!.orderId).toBe("s0");
  });

  test("an amend keeps priority when price stays and volume does not grow", () => {
    const book = new ReferenceBook();
    book.apply(limit("a", "u1", "bid", "10", "2"));
    book.apply(limit("b", "u2", "bid", "10", "1"));
    const down = book.apply(amend({ id: "a", userId: "u1", volume: "1.5" }));
    expect(down.events[0]!.payload).toEqual({
      orderId: "a",
      userId: "u1",
      pairId: 1,
      side: "bid",
      type: "limit",
      priorityKept: true,
      before: { price: "10", volume: "2", volumeTotal: "2" },
      after: { price: "10", volume: "1.5", volumeTotal: "1.5" },
      executedVolume: "0",
    });
    expect(down.result).toMatchObject({ code: 0, orderStatus: "rested", remainingVolume: "1.5" });
    const hit = book.apply(limit("x1", "u3", "ask", "10", "1"));
    expect(hit.events[0]!.payload.orderId).toBe("a");
    // Growing goes to the back of the level: b trades first now.
    const up = book.apply(amend({ id: "a", userId: "u1", volume: "3" }));
    expect(up.events[0]!.payload).toMatchObject({
      priorityKept: false,
      after: { volume: "2", volumeTotal: "3" },
      executedVolume: "1",
    });
    const hit2 = book.apply(limit("x2", "u3", "ask", "10", "1"));
    expect(hit2.events[0]!.payload.orderId).toBe("b");
  });

  test("amend: unchanged, below executed, to executed", () => {
    const book = new ReferenceBook();
    book.apply(limit("a", "u1", "bid", "10", "2"));
    book.apply(limit("x", "u2", "ask", "10", "0.5"));
    const same = book.apply(amend({ id: "a", userId: "u1", volume: "2.0", price: "10" }));
    expect(same).toEqual({
      result: {
        commandId: same.result.commandId,
        status: "accepted",
        code: 107,
        codeName: "amend-unchanged",
        orderId: "a",
        orderStatus: "rested",
        executedVolume: "0",
        remainingVolume: "1.5",
        events: 0,
      },
      events: [],
    });
    const below = book.apply(amend({ id: "a", userId: "u1", volume: "0.4" }));
    expect(below.result).toMatchObject({ code: 305, status: "rejected" });
    const done = book.apply(amend({ id: "a", userId: "u1", volume: "0.5" }));
    expect(types(done.events)).toEqual(["order.amended.v1", "order.cancelled.v1"]);
    expect(done.events[1]!.payload).toEqual({
      orderId: "a",
      userId: "u1",
      pairId: 1,
      side: "bid",
      price: "10",
      volume: "1.5",
      volumeTotal: "0.5",
      executedVolume: "0.5",
      reason: "amend",
      code: 0,
    });
    expect(done.result).toMatchObject({ code: 0, orderStatus: "filled", remainingVolume: "0" });
    expect(book.restingCount()).toBe(0);
  });

  test("an amend that crosses re-matches as a GTC limit taker", () => {
    const book = new ReferenceBook();
    book.apply(limit("x", "u2", "ask", "10.1", "0.5"));
    book.apply(limit("a", "u1", "bid", "10", "1"));
    book.apply(stopMarket("s", "u3", "bid", "10.1", "0.1"));
    const out = book.apply(amend({ id: "a", userId: "u1", price: "10.1" }));
    expect(types(out.events)).toEqual([
      "order.amended.v1",
      "order.filled.v1", // x, the maker
      "deal.executed.v1",
      "order.rested.v1", // a's remainder; then its trade at 10.1 triggers s
      "order.triggered.v1",
      "order.cancelled.v1", // s, a market bid, meets an empty ask side
    ]);
    expect(out.result).toMatchObject({
      code: 0,
      orderStatus: "partially-filled-rested",
      executedVolume: "0.5",
      remainingVolume: "0.5",
      triggeredStops: 1,
    });
    // A post-only order may not re-price across.
    book.apply(limit("p", "u1", "ask", "10.5", "1", { postOnly: true }));
    const po = book.apply(amend({ id: "p", userId: "u1", price: "10" }));
    expect(po.result).toMatchObject({ code: 300, reason: "post-only order would take" });
  });

  test("cancel of a stop, cancel-all order and bound, halts", () => {
    const book = new ReferenceBook();
    book.apply(limit("s", "u1", "bid", "10", "1", { type: "stop-limit", stopPrice: "10.3" }));
    const c = book.apply({
      ...envelope(),
      type: "order.cancel",
      payload: { id: "s", userId: "u1", pairId: 1 },
    });
    expect(c.events[0]!.payload).toMatchObject({ reason: "user", stopPrice: "10.3", price: "10" });
    book.apply(limit("b1", "u1", "bid", "9.5", "1"));
    book.apply(limit("b2", "u1", "bid", "9.8", "1"));
    book.apply(limit("k1", "u1", "ask", "10.5", "1"));
    book.apply(stopMarket("k2", "u1", "ask", "9.5", "1"));
    book.apply(limit("q1", "u1", "bid", "9.5", "1", { pairId: 2 }));
    const all = book.apply({ ...envelope(), type: "order.cancel-all", payload: { userId: "u1" } });
    expect(ofType(all.events, "order.cancelled.v1").map((p) => [p.orderId, p.reason])).toEqual([
      ["b2", "cancel-all"],
      ["b1", "cancel-all"],
      ["k1", "cancel-all"],
      ["k2", "cancel-all"],
      ["q1", "cancel-all"],
    ]);
    expect(all.result).toEqual({
      commandId: all.result.commandId,
      status: "accepted",
      code: 0,
      codeName: "ok",
      cancelledOrders: 5,
      events: 5,
    });
    for (let i = 0; i <= MAX_CANCEL_ALL; i++)
      book.apply(limit(`m${i}`, "u1", "bid", "9.5", "0.01"));
    const partial = book.apply({
      ...envelope(),
      type: "order.cancel-all",
      payload: { userId: "u1", pairId: 1 },
    });
    expect(partial.result).toMatchObject({ code: 108, cancelledOrders: MAX_CANCEL_ALL });
    const rest = book.apply({
      ...envelope(),
      type: "order.cancel-all",
      payload: { userId: "u1", pairId: 1 },
    });
    expect(rest.result).toMatchObject({ code: 0, cancelledOrders: 1 });

    const halt = (type: "pair.halt" | "pair.resume") =>
      book.apply({ ...envelope(), type, payload: { pairId: 1, reason: "maintenance" } });
    expect(halt("pair.halt").result).toEqual({
      commandId: `s${step}`,
      status: "accepted",
      code: 0,
      codeName: "ok",
      events: 1,
    });
    expect(halt("pair.halt").result.code).toBe(306);
    expect(book.apply(limit("h1", "u1", "bid", "9.5", "1")).result.code).toBe(304);
    expect(book.apply(stopMarket("h2", "u1", "bid", "9.5", "1")).result.code).toBe(304);
    expect(halt("pair.resume").events[0]!.payload).toEqual({ pairId: 1, reason: "maintenance" });
    expect(halt("pair.resume").result.code).toBe(307);
  });
});

describe("the reference book follows docs/orders.md: good-till-date and the clock", () => {
  const gtd = (id: string, expireAt: number, extra: Partial<PlaceOrderPayload> = {}) =>
    limit(id, "u1", "bid", "9.5", "1", { timeInForce: "gtd", expireAt, ...extra });
  const refusal = (outcome: { result: { code: number; reason?: string } }) => [
    outcome.result.code,
    outcome.result.reason,
  ];

  test("gtd and expireAt go together; the deadline is checked after the 2xx checks, before the halt", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    expect(book.now()).toBe(T0);
    const at = T0 + 10;
    expect(
      refusal(book.apply(limit("a", "u1", "bid", "9.5", "1", { timeInForce: "gtd" }))),
    ).toEqual([209, "gtd needs expireAt"]);
    expect(refusal(book.apply(limit("b", "u1", "bid", "9.5", "1", { expireAt: at })))).toEqual([
      209,
      "expireAt needs timeInForce gtd",
    ]);
    expect(refusal(book.apply(gtd("c", at, { type: "market", price: "0" })))).toEqual([
      209,
      "a market order cannot be gtd: it never rests",
    ]);
    expect(
      refusal(book.apply(gtd("d", at, { type: "stop-limit", stopPrice: "10", postOnly: true }))),
    ).toEqual([209, "post-only cannot be a stop order"]);
    expect(refusal(book.apply(gtd("e", T0)))).toEqual([309, `expireAt ${T0} is not after ${T0}`]);
    const far = T0 + MAX_EXPIRY_AHEAD + 1;
    expect(refusal(book.apply(gtd("f", far)))).toEqual([
      310,
      `expireAt ${far} is more than 90 days after ${T0}`,
    ]);
    // A 2xx first; the deadline before the halt.
    expect(book.apply(gtd("g", T0, { price: "abc" })).result.code).toBe(202);
    book.apply({ ...envelope(), type: "pair.halt", payload: { pairId: 1, reason: "x" } });
    expect(book.apply(gtd("h", T0 - 1)).result.code).toBe(309);
    expect(book.apply(gtd("i", at)).result.code).toBe(304);
    book.apply({ ...envelope(), type: "pair.resume", payload: { pairId: 1, reason: "x" } });
    // Exactly 90 days is accepted; a post-only order may be gtd.
    expect(book.apply(gtd("j", T0 + MAX_EXPIRY_AHEAD)).result.code).toBe(100);
    const k = book.apply(gtd("k", at, { postOnly: true, side: "ask", price: "10" }));
    expect(k.result.code).toBe(100);
    expect(k.events[0]!.payload).toEqual({
      orderId: "k",
      userId: "u1",
      pairId: 1,
      side: "ask",
      price: "10",
      volume: "1",
      volumeTotal: "1",
      executedVolume: "0",
      timestamp: k.events[0]!.payload.timestamp,
      stp: "none",
      expireAt: at,
    });
    const s = book.apply(gtd("s", at, { type: "stop-market", price: "0", stopPrice: "10.5" }));
    expect(Object.entries(s.events[0]!.payload).slice(-3)).toEqual([
      ["stp", "none"],
      ["timestamp", s.events[0]!.payload.timestamp],
      ["expireAt", at],
    ]);
    expect(s.events[0]!.payload.timeInForce).toBe("gtd");
  });

  test("a tick expires what is due: deadline, then time priority, each on its own pair", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    book.apply(gtd("late", T0 + 20));
    book.apply(gtd("b", T0 + 10, { pairId: 2 }));
    book.apply(
      gtd("q", T0 + 10, {
        type: "stop-market",
        price: "0",
        volume: "0",
        volumeTotal: "0",
        quoteVolume: "10",
        stopPrice: "10.5",
      }),
    );
    book.apply(gtd("a", T0 + 10, { pairId: 3, ...precisions(3) }));
    book.apply(gtd("never", T0 + 30));
    book.apply(limit("x", "u2", "ask", "9.5", "0.25", { pairId: 2 })); // b fills in part
    expect(book.nextExpiry()).toBe(T0 + 10);
    expect(book.apply(tick(T0 + 9)).result).toMatchObject({ expiredOrders: 0, events: 0 });
    const out = book.apply(tick(T0 + 20));
    expect(out.result).toEqual({
      commandId: out.result.commandId,
      status: "accepted",
      code: 0,
      codeName: "ok",
      expiredOrders: 4,
      events: 4,
    });
    expect(out.events.map((e) => [e.type, e.pairId, e.payload.orderId])).toEqual([
      ["order.expired.v1", 2, "b"],
      ["order.expired.v1", 1, "q"],
      ["order.expired.v1", 3, "a"],
      ["order.expired.v1", 1, "late"],
    ]);
    expect(out.events[0]!.payload).toEqual({
      orderId: "b",
      userId: "u1",
      pairId: 2,
      side: "bid",
      price: "9.5",
      volume: "0.75",
      volumeTotal: "1",
      executedVolume: "0.25",
      expireAt: T0 + 10,
    });
    expect(out.events[1]!.payload).toEqual({
      orderId: "q",
      userId: "u1",
      pairId: 1,
      side: "bid",
      price: "0",
      volume: "0",
      volumeTotal: "0",
      executedVolume: "0",
      expireAt: T0 + 10,
      quoteVolume: "10",
      stopPrice: "10.5",
    });
    // Time never goes back; an expired order is finished.
    book.apply(tick(T0 + 5));
    expect(book.now()).toBe(T0 + 20);
    expect(book.nextExpiry()).toBe(T0 + 30);
    const c = book.apply({
      ...envelope(),
      type: "order.cancel",
      payload: { id: "late", userId: "u1", pairId: 1 },
    });
    expect(c.result.code).toBe(302);
  });

  test("an amend keeps the deadline; one that loses priority counts from then", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    book.apply(
      gtd("stop", T0 + 10, { type: "stop-limit", stopPrice: "9.8", price: "10", side: "ask" }),
    );
    book.apply(gtd("first", T0 + 10));
    book.apply(gtd("second", T0 + 10));
    book.apply(amend({ id: "first", userId: "u1", volume: "2" })); // grows: to the back
    // Triggered, the stop-limit rests with its deadline, and counts from then.
    book.apply(limit("m", "u2", "ask", "9.8", "1"));
    const trade = book.apply(limit("t", "u3", "bid", "9.8", "1"));
    expect(trade.result.triggeredStops).toBe(1);
    expect(book.liveOrders().find((o) => o.id === "stop")).toMatchObject({
      kind: "limit",
      expireAt: T0 + 10,
    });
    const out = book.apply(tick(T0 + 10));
    expect(out.events.map((e) => e.payload.orderId)).toEqual(["second", "first", "stop"]);
    expect(out.events[1]!.payload).toMatchObject({ volume: "2", volumeTotal: "2" });
  });
});

const cancelAfter = (userId: string, timeoutMs: number, pairId = 1): CommandEnvelope => ({
  ...envelope(pairId),
  type: "session.cancel-after",
  payload: { userId, timeoutMs },
});
const cancel = (id: string, userId: string, pairId = 1): CommandEnvelope => ({
  ...envelope(pairId),
  type: "order.cancel",
  payload: { id, userId, pairId },
});
/** Events as [type, envelope pairId, orderId or (session.triggered.v1) userId]. */
const shape = (events: EventEnvelope[]) =>
  events.map((e) => [e.type, e.pairId, e.payload.orderId ?? e.payload.userId]);

describe("the reference book follows docs/orders.md: the dead-man's switch", () => {
  const badTimeout = {
    status: "rejected",
    code: 212,
    codeName: "bad-timeout",
    reason: "timeoutMs must be 0 (disarm) or 1000..86400000",
    orderStatus: "rejected",
    events: 1,
  } as const;

  test("session.cancel-after arms from the engine's time, a renewal replaces it, 0 disarms", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    for (const timeoutMs of [999, MAX_CANCEL_AFTER + 1, 1500.5, -1000, Number.NaN]) {
      const out = book.apply(cancelAfter("u1", timeoutMs));
      expect(out.result).toEqual({ commandId: out.result.commandId, ...badTimeout });
      expect(out.events[0]!.payload).toEqual({
        userId: "u1",
        pairId: 1,
        commandType: "session.cancel-after",
        code: 212,
        codeName: "bad-timeout",
        reason: badTimeout.reason,
      });
    }
    expect(book.switches()).toEqual([]);
    // No event; the result names the deadline.
    const armed = book.apply(cancelAfter("u1", 5000, 2));
    expect(armed).toEqual({
      result: {
        commandId: armed.result.commandId,
        status: "accepted",
        code: 0,
        codeName: "ok",
        events: 0,
        triggerAt: T0 + 5000,
      },
      events: [],
      sessionChanges: [{ op: "switch-put", userId: "u1", deadline: T0 + 5000 }],
    });
    book.apply(tick(T0 + 4000));
    expect(book.apply(cancelAfter("u1", 5000)).result.triggerAt).toBe(T0 + 9000);
    expect(book.apply(cancelAfter("u2", MIN_CANCEL_AFTER)).result.triggerAt).toBe(T0 + 5000);
    expect(book.switches()).toEqual([
      ["u1", T0 + 9000],
      ["u2", T0 + 5000],
    ]);
    expect(book.nextExpiry()).toBe(T0 + 5000);
    const off = book.apply(cancelAfter("u2", 0));
    expect(off.result).toEqual({
      commandId: off.result.commandId,
      status: "accepted",
      code: 0,
      codeName: "ok",
      events: 0,
    });
    expect(off.sessionChanges).toEqual([{ op: "switch-remove", userId: "u2" }]);
    // Disarming a user with no switch changes nothing.
    expect(book.apply(cancelAfter("u2", 0)).sessionChanges).toEqual([]);
    expect(book.nextExpiry()).toBe(T0 + 9000);
    const day = book.apply(cancelAfter("u3", MAX_CANCEL_AFTER));
    expect(day.result.triggerAt).toBe(T0 + 4000 + MAX_CANCEL_AFTER);
  });

  test("a fired switch: session.triggered.v1 on the partition, then the user's orders as a cancel-all takes them, halted pairs too", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    book.apply(limit("b2", "u1", "bid", "9.5", "1", { pairId: 2 }));
    book.apply(limit("a1", "u1", "ask", "10.5", "1"));
    book.apply(limit("b1", "u1", "bid", "9.5", "1"));
    book.apply(stopMarket("s1", "u1", "bid", "10.3", "1"));
    book.apply(limit("b1b", "u1", "bid", "9.8", "1"));
    book.apply(limit("x", "u2", "bid", "9.8", "1"));
    book.apply({ ...envelope(2), type: "pair.halt", payload: { pairId: 2, reason: "x" } });
    // Its envelope's pair only names the partition.
    expect(book.apply(cancelAfter("u1", 1000, 3)).result.triggerAt).toBe(T0 + 1000);
    expect(book.apply(tick(T0 + 999)).events).toEqual([]);
    expect(book.nextExpiry()).toBe(T0 + 1000);
    const fired = book.apply(tick(T0 + 1000));
    expect(shape(fired.events)).toEqual([
      ["session.triggered.v1", 0, "u1"],
      ["order.cancelled.v1", 1, "b1b"],
      ["order.cancelled.v1", 1, "b1"],
      ["order.cancelled.v1", 1, "a1"],
      ["order.cancelled.v1", 1, "s1"],
      ["order.cancelled.v1", 2, "b2"],
    ]);
    expect(fired.events[0]!.payload).toEqual({ userId: "u1", triggerAt: T0 + 1000 });
    expect(fired.events[1]!.payload).toEqual({
      orderId: "b1b",
      userId: "u1",
      pairId: 1,
      side: "bid",
      price: "9.8",
      volume: "1",
      volumeTotal: "1",
      executedVolume: "0",
      reason: "cancel-after",
      code: 0,
    });
    expect(fired.result).toEqual({
      commandId: fired.result.commandId,
      status: "accepted",
      code: 0,
      codeName: "ok",
      expiredOrders: 0,
      events: 6,
      cancelledOrders: 5,
    });
    expect(fired.sessionChanges).toEqual([
      { op: "switch-remove", userId: "u1" },
      { op: "sweep-put", userId: "u1", deadline: T0 + 1000 },
      { op: "sweep-remove", userId: "u1" },
    ]);
    expect(book.liveOrders().map((o) => o.id)).toEqual(["x"]);
    expect([book.switches(), book.sweeps(), book.nextExpiry()]).toEqual([[], [], undefined]);
    // Finished; the switch fired once.
    expect(book.apply(cancel("b1", "u1")).result.code).toBe(302);
    const later = book.apply(tick(T0 + 5000));
    expect(later.result).toEqual({ ...later.result, expiredOrders: 0, events: 0 });
    expect(later.result.cancelledOrders).toBeUndefined();
  });

  test("a tick's work: deadlines earliest first, a switch before an order at its millisecond, switches by user id", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    const gtd = (id: string, userId: string, expireAt: number) =>
      limit(id, userId, "bid", "9.5", "1", { timeInForce: "gtd", expireAt });
    book.apply(gtd("early", "u3", T0 + 999));
    book.apply(limit("v", "u2", "ask", "10.5", "1", { pairId: 2 }));
    book.apply(limit("w", "u1", "bid", "9.5", "1"));
    book.apply(gtd("own", "u1", T0 + 1000)); // the switch goes first and cancels it
    book.apply(gtd("tie", "u3", T0 + 1000));
    book.apply(cancelAfter("u2", 1000));
    book.apply(cancelAfter("u1", 1000));
    const out = book.apply(tick(T0 + 1000));
    expect(shape(out.events)).toEqual([
      ["order.expired.v1", 1, "early"],
      ["session.triggered.v1", 0, "u1"],
      ["order.cancelled.v1", 1, "w"],
      ["order.cancelled.v1", 1, "own"],
      ["session.triggered.v1", 0, "u2"],
      ["order.cancelled.v1", 2, "v"],
      ["order.expired.v1", 1, "tie"],
    ]);
    expect(out.result).toMatchObject({ expiredOrders: 2, cancelledOrders: 3, events: 7 });
  });

  test(`the ${MAX_EXPIRIES} a tick are shared with expiries; a sweep goes on first, with what the user placed meanwhile`, () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    for (let i = 0; i < MAX_EXPIRIES + 5; i++)
      book.apply(limit(`m${i}`, "u1", "bid", i % 2 === 0 ? "9.5" : "9.8", "0.01"));
    const gtd = (id: string, expireAt: number) =>
      limit(id, "u2", "ask", "10.5", "1", { timeInForce: "gtd", expireAt, pairId: 2 });
    book.apply(gtd("g1", T0 + 500));
    book.apply(gtd("g2", T0 + 1000));
    book.apply(limit("z", "u3", "ask", "10.3", "1"));
    book.apply(cancelAfter("u3", 1000));
    book.apply(cancelAfter("u1", 1000));
    const first = book.apply(tick(T0 + 1000));
    expect(first.result).toMatchObject({ expiredOrders: 1, cancelledOrders: MAX_EXPIRIES - 1 });
    // Bids best first: the 9.8s, then the 9.5s.
    expect(shape(first.events.slice(0, 3))).toEqual([
      ["order.expired.v1", 2, "g1"],
      ["session.triggered.v1", 0, "u1"],
      ["order.cancelled.v1", 1, "m1"],
    ]);
    expect(first.sessionChanges).toEqual([
      { op: "switch-remove", userId: "u1" },
      { op: "sweep-put", userId: "u1", deadline: T0 + 1000 },
    ]);
    expect(book.sweeps()).toEqual([["u1", T0 + 1000]]);
    expect(book.switches()).toEqual([["u3", T0 + 1000]]);
    book.apply(limit("late", "u1", "bid", "9.5", "1", { pairId: 3, ...precisions(3) }));
    const next = book.apply(tick(T0 + 1000));
    // The 9.8s (502) and 497 of the 9.5s went: six are left, m994 to m1004.
    expect(shape(next.events)).toEqual([
      ...[994, 996, 998, 1000, 1002, 1004].map((i) => ["order.cancelled.v1", 1, `m${i}`]),
      ["order.cancelled.v1", 3, "late"],
      ["session.triggered.v1", 0, "u3"],
      ["order.cancelled.v1", 1, "z"],
      ["order.expired.v1", 2, "g2"],
    ]);
    expect(next.result).toMatchObject({ expiredOrders: 1, cancelledOrders: 8, events: 10 });
    expect(next.sessionChanges).toEqual([
      { op: "sweep-remove", userId: "u1" },
      { op: "switch-remove", userId: "u3" },
      { op: "sweep-put", userId: "u3", deadline: T0 + 1000 },
      { op: "sweep-remove", userId: "u3" },
    ]);
    expect([book.restingCount(), book.nextExpiry()]).toEqual([0, undefined]);
  });
});

/**
 * Runs a script through the engine and the reference: events and results agree at every step,
 * check(), digests and changes after every step too, or, for long scripts, after every command
 * but a place, and at the end. Before each command of `reloadBefore` the engine is replaced by
 * one loaded from its changes (books, stops, halts, switches, sweeps) and the clock; both hear
 * the shell's accepted-order markers, since a reloaded engine forgets the finished ids. The
 * reference has the engine's quirks unless `quirks` says otherwise.
 */
function expectAgreement(
  commands: CommandEnvelope[],
  stateEveryStep = true,
  reloadBefore: number[] = [],
  quirks: readonly Quirk[] = ENGINE_QUIRKS,
) {
  let engine = new MatchingEngine();
  const reference = new ReferenceBook({ quirks });
  const mirror = new Mirror();
  const accepted = new Set<string>();
  const results = commands.map((command, index) => {
    if (reloadBefore.includes(index)) {
      const time = engine.now();
      mirror.expectMatches(engine);
      engine = mirror.load();
      engine.loadClock(time);
      engine.check();
      engine.checkDigest();
      expect(engine.digest()).toBe(reference.digest());
      expect(engine.nextExpiry()).toBe(reference.nextExpiry());
    }
    const marker = markerOf(command, accepted);
    const actual = engine.apply(command, marker);
    const expected = reference.apply(command, marker);
    expect(JSON.stringify(actual.events)).toBe(JSON.stringify(expected.events));
    expect(actual.result).toEqual(expected.result);
    markAccepted(accepted, actual);
    expectSameSessions(engine, reference, actual.changes, expected);
    mirror.apply(actual.changes);
    if (stateEveryStep || command.type !== "order.place") {
      engine.check();
      expect(engine.nextExpiry()).toBe(reference.nextExpiry());
      expect(engine.digest()).toBe(reference.digest());
      mirror.expectMatches(engine);
    }
    return actual.result;
  });
  engine.check();
  engine.checkDigest();
  expect(engine.digest()).toBe(reference.digest());
  mirror.expectMatches(engine);
  return results;
}

test("engine agrees with the reference book at the bounds: 64 triggers, 1,000 cancels", () => {
  const cancelAll = (pairId?: number): CommandEnvelope => ({
    ...envelope(),
    type: "order.cancel-all",
    payload: pairId === undefined ? { userId: "u1" } : { userId: "u1", pairId },
  });
  const results = expectAgreement(
    [
      limit("a0", "u1", "ask", "10", "2"),
      ...Array.from({ length: 70 }, (_, i) => stopMarket(`s${i}`, "u2", "bid", "9.5", "0.01")),
      // Each triggered stop's trade would trigger the next: the bound stops the cascade at 64.
      limit("t1", "u3", "bid", "10", "0.01"),
      limit("t2", "u3", "bid", "10", "0.01"), // the six left trigger with a later trade
      ...Array.from({ length: MAX_CANCEL_ALL }, (_, i) =>
        limit(`m${i}`, "u1", "bid", "9.5", "0.01"),
      ),
      stopMarket("k", "u1", "ask", "9", "1"),
      cancelAll(),
      cancelAll(1),
      cancelAll(),
    ],
    false,
  );
  const at = (i: number) => results.at(i)!;
  expect(at(71).triggeredStops).toBe(MAX_TRIGGERED_STOPS);
  expect(at(72).triggeredStops).toBe(70 - MAX_TRIGGERED_STOPS);
  expect(at(-3)).toMatchObject({ code: 108, cancelledOrders: MAX_CANCEL_ALL });
  expect(at(-2)).toMatchObject({ code: 0, cancelledOrders: 2 }); // one bid and the stop
  expect(at(-1)).toMatchObject({ code: 0, cancelledOrders: 0, events: 0 });
});

test("engine agrees: a quote-sized stop amended in its stopPrice keeps waiting", () => {
  // Its unfilled volume is "0" by definition; only an amend naming `volume` can finish an order.
  const results = expectAgreement([
    limit("q", "u1", "bid", "0", "0", {
      type: "stop-market",
      stopPrice: "9.5",
      volumeTotal: "0",
      quoteVolume: "10",
    }),
    amend({ id: "q", userId: "u1", stopPrice: "9.8" }),
  ]);
  expect(results[1]).toMatchObject({ code: 0, orderStatus: "stop-accepted" });
});

test("engine agrees: an amend that re-matches and finishes removes the order in the changes", () => {
  const filled = expectAgreement([
    limit("b", "u1", "bid", "9.5", "1"),
    limit("a", "u2", "ask", "9.8", "1"),
    amend({ id: "b", userId: "u1", price: "9.8" }),
  ]);
  expect(filled[2]).toMatchObject({ code: 0, orderStatus: "filled", executedVolume: "1" });
  // Self-trade prevention stops the re-match: the amended order is cancelled.
  const stopped = expectAgreement([
    limit("b2", "u1", "bid", "9.5", "2", { stp: "cancel-taker" }),
    limit("x2", "u2", "ask", "9.8", "1"),
    limit("a2", "u1", "ask", "9.8", "1"),
    amend({ id: "b2", userId: "u1", price: "9.8" }),
  ]);
  expect(stopped[3]).toMatchObject({ code: 105, orderStatus: "cancelled", executedVolume: "1" });
});

test(`engine agrees at the expiry bound: ${MAX_EXPIRIES} a tick, the rest in order`, () => {
  const gtd = (id: string, expireAt: number, extra: Partial<PlaceOrderPayload> = {}) =>
    limit(id, "u1", "bid", "9.5", "0.01", { timeInForce: "gtd", expireAt, ...extra });
  const results = expectAgreement(
    [
      tick(T0),
      // Two deadlines interleaved, over two pairs: some of the later one is left over.
      ...Array.from({ length: MAX_EXPIRIES + 3 }, (_, i) =>
        gtd(`g${i}`, T0 + (i % 2 === 0 ? 10 : 5), { pairId: 1 + (i % 2), price: "9.5" }),
      ),
      gtd("sl", T0 + 10, {
        type: "stop-limit",
        stopPrice: "10",
        price: "10.1",
        volume: "2",
        volumeTotal: "2",
      }),
      gtd("sm", T0 + 10, { type: "stop-market", price: "0", stopPrice: "10.5" }),
      tick(T0 + 20),
      // Due but not yet expired, a stop still triggers; a stop-limit rests with its deadline.
      limit("a", "u2", "ask", "10", "2"),
      limit("t", "u3", "bid", "10", "1"),
      tick(T0 + 20),
      tick(T0 + 21),
    ],
    false,
  );
  const at = (i: number) => results.at(i)!;
  expect(at(MAX_EXPIRIES + 6)).toMatchObject({ code: 0, expiredOrders: MAX_EXPIRIES });
  expect(at(-3)).toMatchObject({ triggeredStops: 1 });
  // g998, g1000 and g1002 (T0 + 10), sm, then sl, which rested after them.
  expect(at(-2)).toMatchObject({ code: 0, expiredOrders: 5 });
  expect(at(-1)).toMatchObject({ code: 0, expiredOrders: 0, events: 0 });
});

test("engine agrees: a gtd order re-matched by an amend, refusals, expiry on a halted pair", () => {
  expectAgreement([
    tick(T0),
    limit("g1", "u1", "bid", "9.5", "2", { timeInForce: "gtd", expireAt: T0 + 5 }),
    limit("g2", "u2", "ask", "10.1", "1", { timeInForce: "gtd", expireAt: T0 + 5 }),
    amend({ id: "g1", userId: "u1", price: "10.1" }), // re-matches, rests with its deadline
    { ...envelope(), type: "pair.halt", payload: { pairId: 1, reason: "x" } },
    limit("g3", "u1", "bid", "9.5", "1", { timeInForce: "gtd", expireAt: T0 }), // 309 first
    tick(T0 + 5), // halted pairs expire too
    { ...envelope(), type: "pair.resume", payload: { pairId: 1, reason: "x" } },
    limit("g4", "u1", "bid", "9.5", "1", { timeInForce: "gtd", expireAt: T0 + 4 }),
    tick(T0 + 2),
  ]);
});

// An expireAt of 0 is a deadline like any other (always past), never "none": a gtd order
// with it is refused, and a gtd stop with it never reaches the stop book.
test("engine agrees: expireAt 0 is not after the engine's time (309)", () => {
  const results = expectAgreement([
    limit("z", "u1", "bid", "9.5", "1", { timeInForce: "gtd", expireAt: 0 }),
    limit("zs", "u1", "bid", "9.5", "1", {
      type: "stop-limit",
      stopPrice: "10",
      timeInForce: "gtd",
      expireAt: 0,
    }),
  ]);
  expect(results.map((r) => r.code)).toEqual([309, 309]);
});

test("engine agrees: switches armed, renewed, disarmed and fired, with expiries at their millisecond", () => {
  const gtd = (id: string, userId: string, expireAt: number, extra = {}) =>
    limit(id, userId, "bid", "9.5", "1", { timeInForce: "gtd", expireAt, ...extra });
  const results = expectAgreement([
    cancelAfter("u1", 2000), // before the first tick: from time 0
    tick(T0),
    limit("a1", "u1", "ask", "10.5", "1"),
    limit("b1", "u1", "bid", "9.8", "0.5", { volumeTotal: "2" }), // executed in part before
    limit("q", "u1", "bid", "0", "0", {
      type: "stop-market",
      stopPrice: "10.3",
      volumeTotal: "0",
      quoteVolume: "10",
    }),
    gtd("g", "u1", T0 + 1000, { pairId: 3, ...precisions(3) }),
    gtd("s", "u2", T0 + 1000, { type: "stop-limit", stopPrice: "10.3", pairId: 2 }),
    limit("c", "u2", "ask", "10.3", "1", { pairId: 2 }),
    limit("d", "u3", "bid", "9.5", "1", { pairId: 2 }),
    { ...envelope(2), type: "pair.halt", payload: { pairId: 2, reason: "x" } },
    cancelAfter("u1", 999),
    cancelAfter("u1", 1000, 9),
    cancelAfter("u2", 1000),
    cancelAfter("u3", 3000),
    cancelAfter("u4", 0),
    tick(T0 + 500),
    cancelAfter("u3", 500 + 1000), // renewed to T0 + 2000
    cancelAfter("u2", 0),
    tick(T0 + 999),
    tick(T0 + 1000), // u1 fires before g (its own) and s (u2's, disarmed) expire
    cancel("b1", "u1"), // finished: 302
    limit("b2", "u1", "bid", "9.5", "1"), // a new order, no switch: it stays
    cancelAfter("u2", 1000),
    tick(T0 + 3000), // u3 at T0 + 2000 (its halted pair too), u2 at T0 + 2000 by user id
    tick(T0 + 3000),
  ]);
  expect(results.map((r) => r.code).slice(10, 12)).toEqual([212, 0]);
  expect(results[19]).toMatchObject({ expiredOrders: 1, cancelledOrders: 4 });
  expect(results[20]!.code).toBe(302);
  expect(results[23]).toMatchObject({ expiredOrders: 0, cancelledOrders: 2 });
});

test(`engine agrees at the switches' bound: ${MAX_EXPIRIES} a tick shared with expiries, over a reload`, () => {
  const many = 2 * MAX_EXPIRIES + 100;
  const pairOf = (i: number) => 1 + (i % 3);
  const commands = [
    tick(T0),
    // One user's orders over three pairs, both sides (bids mostly: the reference sorts the
    // other side at every place), two prices a side, and stops.
    ...Array.from({ length: many }, (_, i) => {
      const bid = i % 64 !== 63;
      const price = bid ? (i % 2 === 0 ? "9.5" : "9.8") : (i >> 6) % 2 === 0 ? "10.3" : "10.5";
      const pairId = pairOf(i);
      return limit(`m${i}`, "u1", bid ? "bid" : "ask", price, "0.01", {
        pairId,
        ...precisions(pairId),
      });
    }),
    stopMarket("k", "u1", "ask", "9", "1"),
    limit("ug", "u1", "bid", "9.5", "1", { timeInForce: "gtd", expireAt: T0 + 1500 }),
    limit("g1", "u2", "bid", "9.5", "1", { timeInForce: "gtd", expireAt: T0 + 500, pairId: 2 }),
    limit("g2", "u2", "bid", "9.5", "1", { timeInForce: "gtd", expireAt: T0 + 1000, pairId: 2 }),
    limit("z1", "u3", "bid", "9.5", "1"),
    limit("z2", "u3", "ask", "10.5", "1", { pairId: 2 }),
    cancelAfter("u3", 1000),
    cancelAfter("u1", 1000),
    tick(T0 + 1000), // g1, then u1 fires: 999 of its orders
    cancel("m3", "u1"), // pair 1's best bid went first: finished
  ];
  const reloadAt = commands.length;
  commands.push(
    limit("late", "u1", "bid", "9.5", "1", { pairId: 2 }), // goes with the sweep
    cancelAfter("u1", 1000), // armed again while its sweep goes on: T0 + 2000
    tick(T0 + 1000), // u1's sweep only: 1,000 more
    tick(T0 + 2100), // the rest of it; then u3 (T0 + 1000), g2, u1 again (nothing left)
    tick(T0 + 2100),
  );
  const results = expectAgreement(commands, false, [reloadAt]);
  const at = (i: number) => results.at(i)!;
  expect(at(reloadAt - 2)).toMatchObject({ expiredOrders: 1, cancelledOrders: MAX_EXPIRIES - 1 });
  expect(at(reloadAt - 1).code).toBe(302);
  expect(at(-3)).toMatchObject({ expiredOrders: 0, cancelledOrders: MAX_EXPIRIES });
  expect(at(-2)).toMatchObject({ expiredOrders: 1, cancelledOrders: many + 3 - 1999 + 2 });
  expect(at(-1)).toMatchObject({ expiredOrders: 0, events: 0 });
});

// --- icebergs and one-cancels-other lists -------------------------------------------------

/** An iceberg: a GTC limit order showing `display` of `volume`. */
const ice = (
  id: string,
  userId: string,
  side: "bid" | "ask",
  price: string,
  volume: string,
  display: string,
  extra: Partial<PlaceOrderPayload> = {},
) => limit(id, userId, side, price, volume, { displayVolume: display, ...extra });
/** An order.place-oco of `legs` (order.place commands, whose payloads it takes). */
const oco = (listId: string, userId: string, legs: CommandEnvelope[], pairId = 1) => {
  const payloads = legs.map((leg) => leg.payload as PlaceOrderPayload);
  return {
    ...envelope(pairId),
    type: "order.place-oco",
    payload: { listId, userId, pairId, legs: payloads },
  } satisfies CommandEnvelope;
};
const stopLimit = (
  id: string,
  userId: string,
  side: "bid" | "ask",
  stop: string,
  price: string,
  volume: string,
  extra: Partial<PlaceOrderPayload> = {},
) => limit(id, userId, side, price, volume, { type: "stop-limit", stopPrice: stop, ...extra });
/** Events as [type, order id (a deal's maker), reason]. */
const brief = (events: EventEnvelope[]) =>
  events.map((e) => [e.type, e.payload.orderId ?? e.payload.makerOrderId, e.payload.reason]);

describe("the reference book follows docs/orders.md: icebergs", () => {
  test("rests showing its display; a filled part shows the next at the back of its level", () => {
    const book = new ReferenceBook();
    const rested = book.apply(ice("i", "u1", "ask", "10", "5", "2"));
    expect(rested.events[0]!.payload).toEqual({
      orderId: "i",
      userId: "u1",
      pairId: 1,
      side: "ask",
      price: "10",
      volume: "2",
      volumeTotal: "5",
      executedVolume: "0",
      timestamp: rested.events[0]!.payload.timestamp,
      stp: "none",
      displayVolume: "2",
      hiddenVolume: "3",
    });
    expect(rested.result).toMatchObject({ code: 100, remainingVolume: "5" });
    book.apply(limit("p", "u2", "ask", "10", "1"));
    expect(book.depth(1).asks).toEqual([{ price: "10", volume: "3", orders: 2 }]);
    const t = book.apply(limit("t", "u3", "bid", "10", "2.5"));
    expect(brief(t.events)).toEqual([
      ["order.updated.v1", "i", undefined],
      ["deal.executed.v1", "i", undefined],
      ["order.rested.v1", "i", undefined],
      ["order.updated.v1", "p", undefined], // p, behind it before, is ahead of its next part
      ["order.filled.v1", "t", undefined],
      ["deal.executed.v1", "p", undefined],
    ]);
    expect(t.events[0]!.payload).toMatchObject({ volume: "0", hiddenVolume: "3", fillVolume: "2" });
    expect(t.events[2]!.payload).toMatchObject({
      volume: "2",
      executedVolume: "2",
      displayVolume: "2",
      hiddenVolume: "1",
    });
    expect(t.events[3]!.payload.hiddenVolume).toBeUndefined(); // p is no iceberg
    expect(book.depth(1).asks).toEqual([{ price: "10", volume: "2.5", orders: 2 }]);
  });

  test("a taker goes on through its level and reaches the next part; fill-or-kill counts hidden parts", () => {
    const book = new ReferenceBook();
    book.apply(ice("i", "u1", "ask", "10", "5", "2"));
    book.apply(limit("a", "u1", "ask", "10.1", "1"));
    expect(
      book.apply(limit("f1", "u2", "bid", "10", "5.5", { timeInForce: "fok" })).result.code,
    ).toBe(104);
    const fok = book.apply(limit("f2", "u2", "bid", "10.1", "5.5", { timeInForce: "fok" }));
    expect(ofType(fok.events, "deal.executed.v1").map((p) => [p.makerOrderId, p.volume])).toEqual([
      ["i", "2"],
      ["i", "2"],
      ["i", "1"],
      ["a", "0.5"],
    ]);
    // Only the last part's fill finishes it.
    expect(ofType(fok.events, "order.filled.v1")[0]).toMatchObject({
      orderId: "i",
      volume: "0",
      hiddenVolume: "0",
    });
    expect(fok.result).toMatchObject({ code: 102, executedVolume: "5.5" });
    // Fill-or-kill asks whether the sweep fills it: here the iceberg's next part goes behind the
    // taker's own order, where self-trade prevention stops it.
    book.apply(ice("j", "u1", "ask", "10.3", "3", "1"));
    book.apply(limit("own", "u2", "ask", "10.3", "1"));
    const stopped = limit("f3", "u2", "bid", "10.3", "3", {
      timeInForce: "fok",
      stp: "cancel-taker",
    });
    expect(book.apply(stopped).result).toMatchObject({ code: 104, executedVolume: "0" });
  });

  test("cancelled, expired or cancelled by self-trade prevention, it goes with its hidden part", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    book.apply(ice("i", "u1", "ask", "10", "10", "3"));
    book.apply(limit("t", "u2", "bid", "10", "1"));
    const c = book.apply(cancel("i", "u1"));
    expect(c.events[0]!.payload).toMatchObject({
      volume: "9",
      volumeTotal: "10",
      executedVolume: "1",
    });
    expect(c.result).toMatchObject({ executedVolume: "1", remainingVolume: "9" });
    book.apply(ice("j", "u1", "ask", "10", "10", "3"));
    const stp = book.apply(
      limit("s", "u1", "bid", "10", "1", { stp: "cancel-maker", timeInForce: "ioc" }),
    );
    expect(stp.events[0]!.payload).toMatchObject({ orderId: "j", reason: "stp", volume: "10" });
    book.apply(ice("g", "u1", "bid", "9.5", "4", "1", { timeInForce: "gtd", expireAt: T0 + 5 }));
    book.apply(limit("x", "u2", "ask", "9.5", "1.5"));
    const expired = book.apply(tick(T0 + 5));
    expect(expired.events[0]!.payload).toMatchObject({
      orderId: "g",
      volume: "2.5",
      executedVolume: "1.5",
    });
  });

  test("an amend only lowers its volume: off the hidden part, then the part shown, priority kept", () => {
    const book = new ReferenceBook();
    book.apply(ice("i", "u1", "ask", "10", "10", "3"));
    book.apply(limit("p", "u2", "ask", "10", "1"));
    const lower = book.apply(amend({ id: "i", userId: "u1", volume: "8" }));
    expect(lower.events[0]!.payload).toEqual({
      orderId: "i",
      userId: "u1",
      pairId: 1,
      side: "ask",
      type: "limit",
      priorityKept: true,
      before: { price: "10", volume: "3", volumeTotal: "10", hiddenVolume: "7" },
      after: { price: "10", volume: "3", volumeTotal: "8", hiddenVolume: "5" },
      executedVolume: "0",
    });
    expect(lower.result).toMatchObject({ code: 0, orderStatus: "rested", remainingVolume: "8" });
    const into = book.apply(amend({ id: "i", userId: "u1", volume: "2", price: "10" }));
    expect(into.events[0]!.payload).toMatchObject({
      after: { volume: "2", volumeTotal: "2", hiddenVolume: "0" },
    });
    expect(book.depth(1).asks).toEqual([{ price: "10", volume: "3", orders: 2 }]);
    // Still first in its level.
    expect(book.apply(limit("t", "u3", "bid", "10", "0.5")).events[0]!.payload.orderId).toBe("i");
    const refused = [{ volume: "20" }, { price: "10.1" }, { volume: "2" }, { volume: "1" }].map(
      (change) => book.apply(amend({ id: "i", userId: "u1", ...change })).result,
    );
    expect(refused.map((r) => [r.code, r.reason])).toEqual([
      [209, "an iceberg's amend may only lower its volume: cancel and place instead"],
      [209, "an iceberg's amend may only lower its volume: cancel and place instead"],
      [107, undefined],
      [0, undefined],
    ]);
    const gone = book.apply(amend({ id: "i", userId: "u1", volume: "0.5" }));
    expect(brief(gone.events)).toEqual([
      ["order.amended.v1", "i", undefined],
      ["order.cancelled.v1", "i", "amend"],
    ]);
    expect(gone.events[1]!.payload).toMatchObject({ volume: "0.5", volumeTotal: "0.5" });
  });

  test("refusals: displayVolume after the volume checks, 209 on other kinds or not below the volume", () => {
    const book = new ReferenceBook();
    const refusal = (command: CommandEnvelope) => {
      const { code, reason } = book.apply(command).result;
      return [code, reason];
    };
    expect(refusal(ice("a", "u1", "bid", "10", "2", "2"))).toEqual([
      209,
      "displayVolume must be below volume",
    ]);
    expect(refusal(ice("b", "u1", "bid", "10", "2", "0"))).toEqual([204, "displayVolume: zero"]);
    expect(refusal(ice("c", "u1", "bid", "10", "2", "1", { timeInForce: "ioc" }))).toEqual([
      209,
      "an iceberg is a GTC or GTD limit order",
    ]);
    expect(refusal(ice("d", "u1", "bid", "10", "2", "0.001"))).toEqual([
      203,
      "displayVolume: more than 2 decimals",
    ]);
    expect(refusal(ice("e", "u1", "bid", "10", "2", "1", { volumeTotal: "1" }))).toEqual([
      211,
      "volume exceeds volumeTotal",
    ]);
    expect(refusal(ice("f", "u1", "bid", "10", "2", "x"))[0]).toBe(202);
    expect(refusal(ice("g", "u1", "bid", "10", "2", "1", { postOnly: true }))[0]).toBe(100);
  });
});

describe("the reference book follows docs/orders.md: one-cancels-other", () => {
  const bracket = (listId: string, extra: Partial<PlaceOrderPayload> = {}) =>
    oco(listId, "u1", [
      limit(`${listId}-tp`, "u1", "ask", "10.5", "1", extra),
      stopMarket(`${listId}-sl`, "u1", "ask", "9.5", "1"),
    ]);

  test("both legs wait, linked; a partial fill of one cancels the other in the same command", () => {
    const book = new ReferenceBook();
    const placed = book.apply(bracket("b"));
    expect(types(placed.events)).toEqual(["order.rested.v1", "order.stop-accepted.v1"]);
    expect(placed.events.map((e) => e.ordinal)).toEqual([0, 1]);
    expect(placed.result).toEqual({
      commandId: placed.result.commandId,
      status: "accepted",
      code: 0,
      codeName: "ok",
      orderId: "b-tp",
      listId: "b",
      legs: [
        {
          orderId: "b-tp",
          code: 100,
          codeName: "rested",
          orderStatus: "rested",
          executedVolume: "0",
          remainingVolume: "1",
        },
        {
          orderId: "b-sl",
          code: 106,
          codeName: "stop-accepted",
          orderStatus: "stop-accepted",
          executedVolume: "0",
          remainingVolume: "1",
        },
      ],
      events: 2,
    });
    expect(book.liveOrders().map((o) => [o.id, o.listId, o.linkedOrderId])).toEqual([
      ["b-tp", "b", "b-sl"],
      ["b-sl", "b", "b-tp"],
    ]);
    const t = book.apply(limit("t", "u2", "bid", "10.5", "0.25"));
    expect(brief(t.events)).toEqual([
      ["order.updated.v1", "b-tp", undefined],
      ["order.filled.v1", "t", undefined],
      ["deal.executed.v1", "b-tp", undefined],
      ["order.cancelled.v1", "b-sl", "oco"],
    ]);
    expect(t.events[3]!.payload).toMatchObject({
      price: "0",
      stopPrice: "9.5",
      executedVolume: "0",
    });
    expect(book.liveOrders().map((o) => [o.id, o.volume, o.linkedOrderId])).toEqual([
      ["b-tp", "0.75", undefined],
    ]);
  });

  test("a trigger, a cancel, an expiry, a cancel-all or a switch ends the list", () => {
    const book = new ReferenceBook();
    book.apply(tick(T0));
    book.apply(limit("m", "u2", "bid", "9.5", "1"));
    book.apply(bracket("a"));
    const trade = book.apply(limit("t", "u3", "ask", "9.5", "0.5"));
    expect(brief(trade.events).slice(3, 5)).toEqual([
      ["order.triggered.v1", "a-sl", undefined],
      ["order.cancelled.v1", "a-tp", "oco"],
    ]);
    book.apply(bracket("c"));
    expect(brief(book.apply(cancel("c-sl", "u1")).events)).toEqual([
      ["order.cancelled.v1", "c-sl", "user"],
      ["order.cancelled.v1", "c-tp", "oco"],
    ]);
    book.apply(bracket("e", { timeInForce: "gtd", expireAt: T0 + 5 }));
    expect(brief(book.apply(tick(T0 + 5)).events)).toEqual([
      ["order.expired.v1", "e-tp", undefined],
      ["order.cancelled.v1", "e-sl", "oco"],
    ]);
    book.apply(bracket("x"));
    const all = book.apply({ ...envelope(), type: "order.cancel-all", payload: { userId: "u1" } });
    expect(brief(all.events)).toEqual([
      ["order.cancelled.v1", "x-tp", "cancel-all"],
      ["order.cancelled.v1", "x-sl", "oco"],
    ]);
    expect(all.result.cancelledOrders).toBe(2);
    book.apply(bracket("s"));
    book.apply(cancelAfter("u1", 1000));
    expect(brief(book.apply(tick(T0 + 1005)).events).slice(1)).toEqual([
      ["order.cancelled.v1", "s-tp", "cancel-after"],
      ["order.cancelled.v1", "s-sl", "oco"],
    ]);
  });

  test("a first leg that trades on arrival: the second is never placed, reported cancelled", () => {
    const book = new ReferenceBook();
    book.apply(limit("m", "u2", "bid", "10", "1"));
    book.apply(stopMarket("s", "u3", "ask", "10", "0.5"));
    const placed = book.apply(
      oco("f", "u1", [
        limit("f-0", "u1", "ask", "10", "0.5"),
        limit("f-1", "u1", "bid", "0", "0", {
          type: "stop-market",
          stopPrice: "10.3",
          volumeTotal: "0",
          quoteVolume: "10",
        }),
      ]),
    );
    expect(brief(placed.events)).toEqual([
      ["order.updated.v1", "m", undefined],
      ["order.filled.v1", "f-0", undefined],
      ["deal.executed.v1", "m", undefined],
      ["order.triggered.v1", "s", undefined],
      ["order.filled.v1", "m", undefined],
      ["order.filled.v1", "s", undefined],
      ["deal.executed.v1", "m", undefined],
      ["order.cancelled.v1", "f-1", "oco"],
    ]);
    expect(placed.events.at(-1)!.payload).toEqual({
      orderId: "f-1",
      userId: "u1",
      pairId: 1,
      side: "bid",
      price: "0",
      volume: "0",
      volumeTotal: "0",
      executedVolume: "0",
      reason: "oco",
      code: 0,
      quoteVolume: "10",
      stopPrice: "10.3",
    });
    expect(placed.result).toMatchObject({ code: 0, triggeredStops: 1, events: 8 });
    expect(placed.result.legs!.map((l) => [l.orderId, l.orderStatus, l.remainingVolume])).toEqual([
      ["f-0", "filled", "0"],
      ["f-1", "cancelled", "0"],
    ]);
    expect(book.apply(cancel("f-1", "u1")).result.code).toBe(302);
  });

  test("refused whole: the list's own checks, a leg's (named), duplicates", () => {
    const book = new ReferenceBook();
    const reason = (command: CommandEnvelope) => {
      const { code, reason } = book.apply(command).result;
      return [code, reason];
    };
    const a = limit("r-0", "u1", "ask", "10.5", "1");
    expect(reason(oco("r", "u1", [a]))).toEqual([209, "a one-cancels-other list has two legs"]);
    expect(
      reason(oco("r", "u1", [a, limit("r-1", "u1", "bid", "9", "1", { timeInForce: "ioc" })])),
    ).toEqual([209, "a leg is a GTC or GTD limit order or a stop order"]);
    expect(
      reason(oco("r", "u1", [a, limit("r-1", "u1", "bid", "9", "1", { stp: "cancel-both" })])),
    ).toEqual([209, "both legs share one stp mode"]);
    expect(reason(oco("r", "u1", [a, limit("r-1", "u1", "bid", "9.55", "1")]))).toEqual([
      203,
      "leg 1: price: more than 1 decimals",
    ]);
    book.apply(limit("m", "u2", "bid", "10", "1"));
    // Post-only: the second leg's would take before anything is placed.
    expect(
      reason(oco("r", "u1", [a, limit("r-1", "u1", "ask", "10", "1", { postOnly: true })])),
    ).toEqual([300, "leg 1: post-only order would take"]);
    expect(book.liveOrders().map((o) => o.id)).toEqual(["m"]);
    expect(book.apply(oco("r", "u1", [a, limit("m", "u1", "bid", "9", "1")])).result).toMatchObject(
      {
        status: "duplicate",
        code: 400,
        orderId: "r-0",
      },
    );
  });
});

test("engine agrees: icebergs refresh across levels, fill-or-kill through hidden parts, amends, expiry, over a reload", () => {
  const results = expectAgreement(
    [
      tick(T0),
      ice("i1", "u1", "ask", "10", "5", "1"),
      limit("p1", "u2", "ask", "10", "0.5"),
      ice("i2", "u3", "ask", "10.1", "3", "0.5", { timeInForce: "gtd", expireAt: T0 + 50 }),
      limit("p2", "u2", "ask", "10.3", "1"),
      stopMarket("s1", "u2", "bid", "10.1", "0.5"),
      limit("f1", "u4", "bid", "10.1", "9", { timeInForce: "fok" }), // 8.5 in reach: killed
      limit("f2", "u4", "bid", "10.1", "7", { timeInForce: "fok" }), // through hidden parts
      limit("x1", "u3", "bid", "10.1", "1", { stp: "cancel-maker", timeInForce: "ioc" }),
      ice("i3", "u1", "bid", "9.5", "4", "1", { timeInForce: "gtd", expireAt: T0 + 20 }),
      ice("i4", "u2", "bid", "9.5", "2", "0.5", { postOnly: true }),
      amend({ id: "i3", userId: "u1", volume: "0.5" }), // into the part shown
      amend({ id: "i4", userId: "u2", price: "9.8" }), // 209
      limit("m1", "u3", "ask", "0", "1.2", { type: "market" }),
      ice("i5", "u1", "ask", "10.5", "3", "1", {
        timeInForce: "gtd",
        expireAt: T0 + 30,
        pairId: 3,
        ...precisions(3),
      }),
      limit("t5", "u2", "bid", "10.5", "1.5", { pairId: 3, ...precisions(3) }),
      tick(T0 + 30),
      cancel("i4", "u2"),
      limit("q", "u4", "bid", "0", "0", { type: "market", volumeTotal: "0", quoteVolume: "25.37" }),
    ],
    true,
    [13, 16],
  );
  expect(results[6]).toMatchObject({ code: 104 });
  expect(results[7]).toMatchObject({ code: 102, executedVolume: "7", triggeredStops: 1 });
  expect(results[16]).toMatchObject({ expiredOrders: 1 });
});

test("engine agrees: lists wait linked and end by a fill, a trigger, an expiry, a cancel-all, over a reload", () => {
  const results = expectAgreement(
    [
      tick(T0),
      limit("m1", "u2", "bid", "9.5", "1"),
      oco("b1", "u1", [
        limit("b1-tp", "u1", "ask", "10.5", "1"),
        stopMarket("b1-sl", "u1", "ask", "9.5", "1"),
      ]),
      oco("b2", "u1", [
        limit("b2-bid", "u1", "bid", "9.5", "1", { postOnly: true }),
        limit("b2-ask", "u1", "ask", "10.5", "1"),
      ]),
      oco("b3", "u3", [
        ice("b3-ice", "u3", "ask", "10.3", "3", "1"),
        stopLimit("b3-stop", "u3", "bid", "10.5", "10.5", "1"),
      ]),
      limit("t1", "u4", "bid", "10.3", "1.5"), // the iceberg leg's part fills: its stop goes
      limit("t2", "u4", "ask", "9.5", "0.5"), // triggers b1's stop, which takes b2's bid
      oco("b4", "u1", [
        limit("b4-ask", "u1", "ask", "10.5", "1", { timeInForce: "gtd", expireAt: T0 + 10 }),
        limit("b4-stop", "u1", "bid", "0", "1", {
          type: "stop-market",
          stopPrice: "10.5",
          timeInForce: "gtd",
          expireAt: T0 + 10,
        }),
      ]),
      tick(T0 + 10),
      oco("b5", "u2", [
        limit("b5-0", "u2", "ask", "10.5", "2"),
        limit("b5-1", "u2", "bid", "10.5", "0.5"), // trades with b3's iceberg: b5-0 goes
      ]),
      oco("b6", "u3", [
        limit("b6-0", "u3", "ask", "10.5", "1"),
        limit("b6-1", "u3", "ask", "10.3", "1", { timeInForce: "gtd", expireAt: T0 + 99 }),
      ]),
      limit("f", "u4", "bid", "10.5", "4", { timeInForce: "fok" }), // one leg of b6 counts
      amend({ id: "b6-0", userId: "u3", volume: "0.5" }), // keeps the link
      oco("b7", "u1", [
        limit("b7-0", "u1", "bid", "9.5", "1"),
        limit("b7-1", "u1", "bid", "9.8", "1", { stp: "cancel-both" }),
      ]), // refused: two stp modes
      oco("b8", "u1", [
        limit("b8-0", "u1", "bid", "9.5", "1"),
        stopMarket("b8-1", "u1", "bid", "10.5", "1"),
      ]),
      { ...envelope(), type: "order.cancel-all", payload: { userId: "u1" } },
      cancel("b6-1", "u3"),
      oco("b3", "u3", [
        limit("b3-tp", "u3", "ask", "10.5", "1"),
        limit("b6-0", "u3", "bid", "9", "1"),
      ]),
      limit("k", "u4", "bid", "9.8", "1"),
      oco("b9", "u3", [
        limit("b9-0", "u3", "ask", "10.5", "2"),
        stopMarket("b9-1", "u3", "ask", "9", "1"),
      ]),
      // Re-priced onto k: it trades in part and rests again, and its stop goes.
      amend({ id: "b9-0", userId: "u3", price: "9.8" }),
    ],
    true,
    [6, 12],
  );
  expect(results.map((r) => r.code)).toEqual([
    0, 100, 0, 0, 0, 102, 102, 0, 0, 0, 0, 104, 0, 209, 0, 0, 0, 400, 100, 0, 0,
  ]);
  expect(results.at(-1)).toMatchObject({ orderStatus: "partially-filled-rested", events: 5 });
});

test(`engine agrees: a cancel-all that reaches one leg at its ${MAX_CANCEL_ALL} takes the other beyond them`, () => {
  const results = expectAgreement(
    [
      ...Array.from({ length: MAX_CANCEL_ALL - 1 }, (_, i) =>
        limit(`m${i}`, "u1", "bid", "9.8", "0.01"),
      ),
      oco("l", "u1", [
        limit("l-0", "u1", "bid", "9.5", "1"),
        stopMarket("l-1", "u1", "ask", "9", "1"),
      ]),
      { ...envelope(), type: "order.cancel-all", payload: { userId: "u1" } },
      { ...envelope(), type: "order.cancel-all", payload: { userId: "u1" } },
    ],
    false,
  );
  expect(results.at(-2)).toMatchObject({ code: 108, cancelledOrders: MAX_CANCEL_ALL });
  expect(results.at(-1)).toMatchObject({ code: 0, cancelledOrders: 0, events: 0 });
});

// --- cases that once broke the engine or departed from docs/orders.md ----------------------
// Each is a minimal script the property runs found; the comment in each says what the engine
// did then (a crash, a failed check, or other events than the page's).

const without = (quirk: Quirk) => ENGINE_QUIRKS.filter((q) => q !== quirk);

test("engine agrees: two linked stops that one taker triggers together", () => {
  // Both legs are reached; the first triggers and cancels the other, which the engine then
  // tries to trigger too: "stop A-1 is not in its stop book".
  expectAgreement([
    limit("m", "u2", "ask", "10", "1"),
    oco("A", "u1", [
      stopMarket("A-0", "u1", "bid", "10", "0.5"),
      stopMarket("A-1", "u1", "ask", "10", "0.5"),
    ]),
    limit("t", "u3", "bid", "10", "0.5"),
  ]);
});

test("engine agrees: a leg's re-match that self-trade prevention stops before a trade keeps the other linked", () => {
  // The amended leg is cancelled (stp); its other leg stays, linked to it: check() fails.
  expectAgreement([
    limit("own", "u1", "bid", "10", "1"),
    oco("B", "u1", [
      limit("B-0", "u1", "ask", "10.5", "1", { stp: "cancel-taker" }),
      limit("B-1", "u1", "ask", "10.3", "1", { stp: "cancel-taker" }),
    ]),
    amend({ id: "B-0", userId: "u1", price: "10" }),
  ]);
});

test("engine agrees: a leg's re-match that reaches its own other leg", () => {
  // The fill of the other leg cancels the re-matching leg, which is out of its book: "order
  // C-0 is not in a level".
  expectAgreement([
    oco("C", "u1", [limit("C-0", "u1", "bid", "9.5", "1"), limit("C-1", "u1", "ask", "10.5", "1")]),
    amend({ id: "C-0", userId: "u1", price: "10.5" }),
  ]);
});

test("engine agrees: a second leg whose self-trade prevention cancels the first, then rests", () => {
  // cancel-maker takes the first leg; the second rests and the engine links it to the first,
  // which is gone: a TypeError.
  expectAgreement([
    oco("I", "u1", [
      limit("I-0", "u1", "bid", "10", "1", { stp: "cancel-maker" }),
      limit("I-1", "u1", "ask", "10", "1", { stp: "cancel-maker" }),
    ]),
  ]);
});

test("engine agrees: an iceberg's amend off its hidden part only leaves the digest stale", () => {
  // No level is marked changed: digest() is the old one, and checkDigest() fails.
  expectAgreement([
    ice("H", "u1", "ask", "10", "5", "1"),
    amend({ id: "H", userId: "u1", volume: "4" }),
  ]);
});

test("engine agrees: a fill-or-kill taker partly filled, then stopped by self-trade prevention", () => {
  // It counts the iceberg's hidden part, but the iceberg's next part goes behind the taker's
  // own order, which stops it (cancel-taker) after one fill.
  expectAgreement(
    [
      ice("i", "u2", "ask", "10", "3", "1"),
      limit("own", "u1", "ask", "10", "1"),
      limit("f", "u1", "bid", "10", "3", { timeInForce: "fok", stp: "cancel-taker" }),
    ],
    true,
    [],
    without("fok-walk"),
  );
});

test("engine agrees: a list's second leg refused for taking after the first was placed", () => {
  // The page: refused whole, naming the leg, nothing placed. The engine places the first,
  // refuses the second and withdraws the first; the list is accepted.
  expectAgreement(
    [
      limit("m", "u2", "bid", "10", "1"),
      oco("D", "u1", [
        limit("D-0", "u1", "ask", "10.5", "1"),
        limit("D-1", "u1", "ask", "10", "1", { postOnly: true }),
      ]),
    ],
    true,
    [],
    without("oco-late-leg-checks"),
  );
});

test("engine agrees: the never-placed leg's cancel carries the payload's texts, no stopPrice", () => {
  expectAgreement(
    [
      limit("m", "u2", "bid", "10", "1"),
      oco("E", "u1", [
        limit("E-0", "u1", "ask", "10.0", "1"),
        limit("E-1", "u1", "ask", "12.3", "1.50", { type: "stop-market", stopPrice: "9.5" }),
      ]),
    ],
    true,
    [],
    without("oco-unplaced-leg-as-sent"),
  );
});

test("engine agrees: an order.place-oco that triggered stops has no triggeredStops", () => {
  expectAgreement(
    [
      limit("m", "u2", "bid", "10", "1"),
      stopMarket("s", "u3", "ask", "10", "0.5"),
      oco("F", "u1", [
        limit("F-0", "u1", "ask", "10", "0.5"),
        limit("F-1", "u1", "ask", "10.5", "1"),
      ]),
    ],
    true,
    [],
    without("oco-no-triggered-stops"),
  );
});

test("engine agrees: a cancel that takes a list's other leg says events: 1", () => {
  expectAgreement(
    [
      oco("G", "u1", [
        limit("G-0", "u1", "ask", "10.5", "1"),
        stopMarket("G-1", "u1", "ask", "9.5", "1"),
      ]),
      cancel("G-0", "u1"),
    ],
    true,
    [],
    without("cancel-counts-one-event"),
  );
});
