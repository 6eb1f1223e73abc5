// The "exchange" workload: the command mix of a busy order book, where most messages manage
// orders rather than trade: limits, markets, cancels, amends and stop orders on one pair;
// with a clock, good-till-date orders and the market makers' dead-man's switches too.

import type { CommandEnvelope, Side } from "../src/domain/index";
import {
  type CommandFactory,
  MIXED_MID,
  mulberry32,
  type OrderIdOf,
  prefillLevels,
  priceText,
  STREAM_TIMED,
  volumeText,
  type Workload,
  type WorkloadClock,
} from "./workload-parts";

/** The command mix, in percent of timed commands (stated in every report). */
export const exchangeMix = {
  limit: 35,
  market: 10,
  stop: 10,
  amend: 20,
  cancel: 24,
  cancelAll: 1,
} as const;

/** Market makers: they place a tenth of the limits and send the cancel-alls. */
const MAKERS = 10;

/**
 * With a clock: a fifth of the limits and stops are good till 0.1-5 s after they are placed,
 * and a market maker's cancel-all is, one time in two, a renewal of its dead-man's switch
 * instead (timeout 1.5 s, about one a second each at 1,000 commands a second: some lapse).
 */
const GTD_SHARE = 0.2;
/**
 * With a clock too: a tenth of the other limits placed behind the touch are icebergs showing
 * a quarter of their volume, and a fifth of the stops come as one-cancels-other brackets with
 * a take-profit limit as far on the other side of the mid.
 */
const ICEBERG_SHARE = 0.1;
const BRACKET_SHARE = 0.2;
const SWITCH_TIMEOUT_MS = 1500;
/** The longest a deadline lies after its command's time: the last good-till-date lifetime. */
export const LONGEST_DEADLINE_MS = 5000;
const SHORTEST_LIFETIME_MS = 100;

/** Orders an amend or cancel may name: the most recent limit and stop orders placed. */
const POOL = 2000;

interface Placed {
  id: string;
  userId: string;
  cents: number;
  stop: boolean;
}

export function exchange(
  factory: CommandFactory,
  pairId: number,
  seed: number,
  orderId: OrderIdOf,
  clock?: WorkloadClock,
): Workload {
  const random = mulberry32(seed ^ 0x68e31da4);
  const timeOf = (i: number) => (clock === undefined ? 0 : clock.epochMs + i * clock.msPerCommand);
  // Drawn only with a clock, so a run without one makes today's commands, byte for byte.
  const expiry = (i: number): number | undefined =>
    clock !== undefined && random() < GTD_SHARE
      ? timeOf(i) +
        SHORTEST_LIFETIME_MS +
        Math.floor(random() * (LONGEST_DEADLINE_MS - SHORTEST_LIFETIME_MS))
      : undefined;
  const pool: Placed[] = [];
  // Recent orders are the likeliest to rest still: the pick leans towards the end.
  const pick = (): Placed | undefined =>
    pool.length === 0 ? undefined : pool[pool.length - 1 - Math.floor(random() ** 3 * pool.length)];
  const remember = (placed: Placed) => {
    pool.push(placed);
    if (pool.length > POOL) pool.shift();
  };
  const m = exchangeMix;
  return {
    name: "exchange",
    description: description(clock),
    pairIds: [pairId],
    prefill: () => prefillLevels(factory, pairId, seed, orderId),
    next: (i) => {
      const roll = random() * 100;
      const side: Side = random() < 0.5 ? "bid" : "ask";
      const userId = `u${Math.floor(random() * 1000)}`;
      const id = orderId(STREAM_TIMED, i);
      const volume = volumeText(1 + Math.floor(random() * 300));
      // A market maker pulling its quotes, often when it has none left: a silent command.
      const maker = `mm${Math.floor(random() * MAKERS)}`;
      if (roll >= 100 - m.cancelAll) {
        if (clock !== undefined && random() < 0.5) {
          return factory.cancelAfter(STREAM_TIMED, i, pairId, maker, SWITCH_TIMEOUT_MS);
        }
        return factory.cancelAll(STREAM_TIMED, i, pairId, maker);
      }
      if (roll >= m.limit + m.market + m.stop) {
        const target = pick();
        if (target !== undefined) {
          if (roll >= 100 - m.cancelAll - m.cancel) {
            pool.splice(pool.indexOf(target), 1);
            return factory.cancel(STREAM_TIMED, i, pairId, target.id, target.userId);
          }
          return amendOf(factory, i, pairId, target, random, volume);
        }
      }
      if (roll < m.limit) {
        const postOnly = random() < 0.1;
        // A tenth of the limits are the market makers' quotes.
        const owner = random() < 0.1 ? maker : userId;
        const offset = postOnly ? 1 + Math.floor(random() * 200) : Math.floor(random() * 300) - 100;
        const cents = side === "bid" ? MIXED_MID - offset : MIXED_MID + offset;
        // Only orders placed behind the touch are managed later: most others trade at once.
        if (offset > 0) remember({ id, userId: owner, cents, stop: false });
        const price = priceText(cents);
        const displayVolume =
          clock !== undefined && !postOnly && offset > 0 && random() < ICEBERG_SHARE
            ? shownPart(volume)
            : undefined;
        return factory.place(STREAM_TIMED, i, {
          id,
          userId: owner,
          side,
          type: "limit",
          pairId,
          price,
          volume,
          postOnly,
          expireAt: expiry(i),
          displayVolume,
        });
      }
      if (roll < m.limit + m.market) {
        const spec = { id, userId, side, type: "market" as const, pairId, price: "0", volume };
        return factory.place(STREAM_TIMED, i, spec);
      }
      const expireAt = expiry(i);
      const bracket = clock !== undefined && random() < BRACKET_SHARE;
      const order = { id, userId, side, pairId, volume, expireAt };
      return stopOrder(factory, i, order, random, remember, bracket);
    },
    ...(clock === undefined ? {} : { tick: (i: number) => factory.tick(timeOf(i)) }),
  };
}

/** The mix, as every report states it. */
function description(clock: WorkloadClock | undefined): string {
  const m = exchangeMix;
  const base =
    `${m.limit}% limit (a tenth post-only), ${m.market}% market, ${m.stop}% stop orders ` +
    `(half stop-limit, 0.2-1.5 away from mid), ${m.amend}% amends (half volume, half price ` +
    `or stop price), ${m.cancel}% cancels, both of recent stops and limits placed behind the ` +
    `touch (some filled meanwhile: those are rejected), ${m.cancelAll}% cancel-alls by one of ` +
    `${MAKERS} market makers, who place a tenth of the limits; prefilled with 10,000 orders ` +
    "on 1,000 levels";
  if (clock === undefined) return base;
  return (
    `${base}; a fifth of the limits and stops good till 0.1-5 s later, a tenth of the ` +
    `limits behind the touch icebergs showing a quarter, a fifth of the stops ` +
    `one-cancels-other brackets with a take-profit limit, and half the ` +
    `cancel-alls a maker's dead-man's switch renewal (timeout ${SWITCH_TIMEOUT_MS} ms), ` +
    `${1 / clock.msPerCommand} commands a virtual millisecond, a clock.tick every batch`
  );
}

/** A buy stop above the mid or a sell stop below it; a stop-limit's price is 0.1 past it. */
function stopOrder(
  factory: CommandFactory,
  i: number,
  order: {
    id: string;
    userId: string;
    side: Side;
    pairId: number;
    volume: string;
    expireAt?: number;
  },
  random: () => number,
  remember: (placed: Placed) => void,
  bracket = false,
): CommandEnvelope {
  const away = 20 + Math.floor(random() * 130);
  const up = order.side === "bid";
  const stopCents = up ? MIXED_MID + away : MIXED_MID - away;
  const limit = random() < 0.5;
  const stop = {
    ...order,
    type: limit ? ("stop-limit" as const) : ("stop-market" as const),
    price: limit ? priceText(up ? stopCents + 10 : stopCents - 10) : "0",
    stopPrice: priceText(stopCents),
  };
  if (!bracket) {
    remember({ id: order.id, userId: order.userId, cents: stopCents, stop: true });
    return factory.place(STREAM_TIMED, i, stop);
  }
  // A bracket: the take-profit limit as far on the other side of the mid, then the stop.
  const takeProfit = {
    ...order,
    id: `${order.id}-tp`,
    type: "limit" as const,
    price: priceText(up ? MIXED_MID - away : MIXED_MID + away),
  };
  return factory.oco(STREAM_TIMED, i, [takeProfit, { ...stop, id: `${order.id}-sl` }]);
}

/** A quarter of a volume (hundredths), at least one hundredth, as an iceberg shows it. */
function shownPart(volume: string): string | undefined {
  const hundredths = Math.round(Number(volume) * 100);
  return hundredths >= 2 ? volumeText(Math.max(1, Math.floor(hundredths / 4))) : undefined;
}

function amendOf(
  factory: CommandFactory,
  i: number,
  pairId: number,
  target: Placed,
  random: () => number,
  volume: string,
): CommandEnvelope {
  const base = { id: target.id, userId: target.userId, pairId };
  if (random() < 0.5) return factory.amend(STREAM_TIMED, i, { ...base, volume });
  target.cents += Math.floor(random() * 11) - 5 || 1;
  const moved = priceText(target.cents);
  return factory.amend(
    STREAM_TIMED,
    i,
    target.stop ? { ...base, stopPrice: moved } : { ...base, price: moved },
  );
}
