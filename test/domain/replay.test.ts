// Replay determinism: the same workload twice gives a byte-identical event transcript and digest,
// and reloading the resting orders into a fresh engine reproduces the digest. With recorded
// times too: clock.ticks in the script, good-till-date orders expiring, dead-man's switches
// firing, icebergs and one-cancels-other lists, and a reload mid-way (books with their icebergs'
// hidden parts and their lists' links, stops, halts, switches, sweeps and the clock) that goes
// on exactly as the engine that never stopped.

import { describe, expect, test } from "bun:test";
import { createWorkload, workloadNames } from "../../bench/workloads";
import {
  type CancelAfterCommand,
  type CommandEnvelope,
  MAX_CANCEL_AFTER_MS,
  MAX_EXPIRY_AHEAD_MS,
  MatchingEngine,
  type PlaceOcoCommand,
  type PlaceOrderPayload,
} from "../../src/domain/index";
import { amend, cancel, cancelAll, pairControl, place, tick } from "./helpers";

function run(name: string, commands: number): { transcript: string; engine: MatchingEngine } {
  const engine = new MatchingEngine();
  const workload = createWorkload(name, { seed: 7 });
  const parts: string[] = [];
  for (const command of workload.prefill())
    parts.push(JSON.stringify(engine.apply(command).events));
  for (let i = 0; i < commands; i++) {
    const outcome = engine.apply(workload.next(i));
    parts.push(JSON.stringify(outcome.result), JSON.stringify(outcome.events));
  }
  engine.check();
  return { transcript: parts.join("\n"), engine };
}

test.each([...workloadNames])(
  "workload %s replays byte-identically and reloads to the same digest",
  (name) => {
    const first = run(name, 3000);
    const second = run(name, 3000);
    expect(second.transcript).toBe(first.transcript);
    expect(second.engine.digest()).toBe(first.engine.digest());
    const reloaded = new MatchingEngine();
    for (const order of first.engine.restingOrders()) reloaded.loadRestingOrder(order);
    for (const stop of first.engine.stopOrders()) reloaded.loadStopOrder(stop);
    reloaded.check();
    expect(reloaded.digest()).toBe(first.engine.digest());
    expect(reloaded.restingOrderCount()).toBe(first.engine.restingOrderCount());
  },
);

test("alternating emits exactly 2 events per command and leaves an empty book", () => {
  const engine = new MatchingEngine();
  const workload = createWorkload("alternating", { seed: 1 });
  let events = 0;
  for (let i = 0; i < 1000; i++) events += engine.apply(workload.next(i)).events.length;
  expect(events).toBe(2000);
  expect(engine.restingOrderCount()).toBe(0);
});

test("the digest tells books apart that differ only where a field's text could pass for another's", () => {
  const digestOf = (orders: Partial<PlaceOrderPayload>[]): string => {
    const engine = new MatchingEngine();
    for (const [i, order] of orders.entries()) {
      const outcome = engine.apply(place({ id: `o${i}`, timestamp: 1_704_067_200_000, ...order }));
      expect(outcome.result.status).toBe("accepted");
    }
    return engine.digest();
  };
  // The old separator byte (0x1f) inside an id against the same byte between id and user id.
  expect(digestOf([{ id: "x\u001fu1", userId: "y" }])).not.toBe(
    digestOf([{ id: "x", userId: "u1\u001fy" }]),
  );
  // A character above 0xff against the three bytes the old encoding gave it.
  expect(digestOf([{ id: "\u4142" }])).not.toBe(digestOf([{ id: "\u00ffAB" }]));
  // Same orders, other precisions: the next order is judged against them.
  expect(digestOf([{ id: "p", priceDecimals: 2 }])).not.toBe(
    digestOf([{ id: "p", priceDecimals: 3 }]),
  );
  // Same book, same digest.
  expect(digestOf([{ id: "p" }])).toBe(digestOf([{ id: "p" }]));
});

// --- recorded times: good-till-date orders and clock.tick ----------------------------------

/** mulberry32: a small seeded generator, so the script is the same on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const T0 = 1_800_000_000_000;

let sessions = 0;

/** How often a command of the timed script is preceded by a session.cancel-after. */
const SESSION_RATE = 0.005;

/** How often one is preceded by an iceberg or a one-cancels-other list. */
const EXTRA_RATE = 0.05;

let lists = 0;

function placeOco(listId: string, legs: PlaceOrderPayload[]): PlaceOcoCommand {
  lists++;
  const { userId, pairId } = legs[0]!;
  return {
    schemaVersion: 1,
    commandId: `oco-${lists}`,
    correlationId: `corr-oco-${lists}`,
    type: "order.place-oco",
    submittedAt: "2027-01-15T08:00:00.000Z",
    pairId,
    partition: 0,
    payload: { listId, userId, pairId, legs },
  };
}

/**
 * An iceberg (two in five, half of them good-till-date) or a one-cancels-other list of the
 * timed script: a take-profit limit and a stop-loss stop on one side (their legs good-till-date
 * half the time), two limits on opposite sides of the traded prices, or an iceberg leg with a
 * stop. At the traded prices they show their next parts, trade on arrival, trigger, fill and
 * expire; three in ten are far from them and wait, hidden parts and links, for a cancel-all,
 * a switch or a reload. Their ids stay out of the script's amends (property.test.ts amends
 * them).
 */
function icebergOrList(i: number, next: () => number, now: number): CommandEnvelope {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const userId = pick(["u1", "u2", "u3", "u4"]);
  const pairId = 1 + Math.floor(next() * 3);
  const side = pick(["bid", "ask"] as const);
  const far = next() < 0.3;
  const price = (bid: string[], ask: string[], near: string[]) =>
    far ? (side === "bid" ? bid : ask) : near;
  const gtd = () =>
    next() < 0.5
      ? { timeInForce: "gtd" as const, expireAt: now + 1 + Math.floor(next() * 400) }
      : {};
  const leg = (suffix: string, payload: Partial<PlaceOrderPayload>) =>
    place({ id: `x${i}${suffix}`, userId, pairId, side, ...payload }).payload;
  const iceberg = (suffix: string) =>
    leg(suffix, {
      price: pick(price(["98.5"], ["101.5"], ["99.5", "100", "100.5"])),
      volume: pick(["3", "5", "8"]),
      displayVolume: pick(["0.5", "1"]),
    });
  const stopLoss = (suffix: string) => {
    const stopPrice = pick(
      far ? [side === "ask" ? "98" : "102"] : side === "ask" ? ["99", "99.5"] : ["100.5", "101"],
    );
    return next() < 0.5
      ? leg(suffix, { type: "stop-market", price: "0", stopPrice })
      : leg(suffix, { type: "stop-limit", price: stopPrice, stopPrice });
  };
  const kind = next();
  if (kind < 0.4) return place({ ...iceberg(""), ...gtd() });
  if (kind < 0.7) {
    const takeProfit = leg("a", {
      price: pick(price(["98.5"], ["101.5"], ["99.5", "100", "100.5", "101"])),
      ...gtd(),
    });
    return placeOco(`list-${i}`, [takeProfit, { ...stopLoss("b"), ...gtd() }]);
  }
  if (kind < 0.85) {
    const bid = leg("a", { side: "bid", price: far ? "98.5" : pick(["99", "99.5"]) });
    const ask = leg("b", { side: "ask", price: far ? "101.5" : pick(["100.5", "101"]) });
    return placeOco(`list-${i}`, next() < 0.5 ? [bid, ask] : [ask, bid]);
  }
  return placeOco(`list-${i}`, [iceberg("a"), stopLoss("b")]);
}

function cancelAfter(userId: string, timeoutMs: number, pairId: number): CancelAfterCommand {
  sessions++;
  return {
    schemaVersion: 1,
    commandId: `cancel-after-${sessions}`,
    correlationId: `corr-ca-${sessions}`,
    type: "session.cancel-after",
    submittedAt: "2027-01-15T08:00:00.000Z",
    pairId,
    partition: 0,
    payload: { userId, timeoutMs },
  };
}

/**
 * A script as the conductor would have recorded it: its clock.ticks carry the times the batches
 * had (mostly a few milliseconds apart, now and then the same time or an older one), between
 * good-till-date limit orders and stops that expire a few milliseconds to a few hundred later
 * (some refused: in the past, beyond 90 days), GTC orders that trade with them, amends,
 * cancels, cancel-alls and halts on three pairs. Between them, from a generator of their own
 * (so the rest of the script is drawn as before), now and then a user's session.cancel-after
 * after a few orders far from the traded prices: mostly one to two and a half seconds, which
 * the ticks pass unless the user renews in time, sometimes 0 (disarm), a day, or a timeout out
 * of range.
 */
function timedScript(seed: number, length: number): CommandEnvelope[] {
  const next = random(seed);
  const session = random(seed + 1);
  const extra = random(seed + 2);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const users = ["u1", "u2", "u3", "u4"];
  const prices = ["99", "99.5", "100", "100.5", "101"];
  const volumes = ["0.5", "1", "2", "3"];
  const ids: string[] = [];
  let now = T0;
  const commands: CommandEnvelope[] = [tick(now)];
  for (let i = 0; i < length; i++) {
    if (session() < SESSION_RATE) {
      // Two in five of u5, a market maker the rest of the script leaves alone (no cancel-all
      // of it), whose orders pile up far from the traded prices until its switch takes them.
      const maker = session() < 0.4;
      const user = maker ? "u5" : users[Math.floor(session() * users.length)]!;
      const kind = session();
      const timeoutMs =
        kind < 0.75
          ? 1000 + Math.floor(session() * 1501)
          : kind < 0.85
            ? 0
            : kind < 0.9
              ? MAX_CANCEL_AFTER_MS
              : [999, MAX_CANCEL_AFTER_MS + 1][Math.floor(session() * 2)]!;
      // Orders far from the traded prices first, so that a switch has orders to take.
      const far = Math.floor(session() * (maker ? 30 : 6));
      for (let k = 0; k < far; k++) {
        const side = session() < 0.5 ? "bid" : "ask";
        const price = side === "bid" ? "90" : "110";
        commands.push(place({ id: `s${i}-${k}`, userId: user, pairId: 1 + (k % 3), side, price }));
      }
      commands.push(cancelAfter(user, timeoutMs, 1 + Math.floor(session() * 3)));
    }
    if (extra() < EXTRA_RATE) commands.push(icebergOrList(i, extra, now));
    const r = next();
    const pairId = 1 + Math.floor(next() * 3);
    const order = {
      id: `o${i}`,
      pairId,
      userId: pick(users),
      side: pick(["bid", "ask"] as const),
      price: pick(prices),
      volume: pick(volumes),
    };
    const deadline = () => {
      const d = next();
      if (d < 0.03) return now - Math.floor(next() * 3); // expiry-in-past
      if (d < 0.05) return now + MAX_EXPIRY_AHEAD_MS + 1; // expiry-too-far
      if (d < 0.07) return now + MAX_EXPIRY_AHEAD_MS;
      return now + 1 + Math.floor(next() * (d < 0.8 ? 40 : 400));
    };
    if (r < 0.16) {
      const step = next();
      if (step < 0.05) {
        commands.push(tick(now - 1 - Math.floor(next() * 20))); // older: time stays
      } else if (step < 0.1) {
        commands.push(tick(now));
      } else {
        now += 1 + Math.floor(next() * 30);
        commands.push(tick(now));
      }
      continue;
    }
    if (r < 0.5) {
      ids.push(order.id);
      commands.push(place({ ...order, timeInForce: "gtd", expireAt: deadline() }));
    } else if (r < 0.64) {
      ids.push(order.id);
      commands.push(place(order));
    } else if (r < 0.72) {
      ids.push(order.id);
      const stop = next() < 0.5 ? "stop-limit" : "stop-market";
      commands.push(
        place({
          ...order,
          type: stop,
          price: stop === "stop-limit" ? order.price : "0",
          stopPrice: pick(prices),
          timeInForce: "gtd",
          expireAt: deadline(),
        }),
      );
    } else if (r < 0.76) {
      commands.push(place({ ...order, type: "market", price: "0", timeInForce: "ioc" }));
    } else if (r < 0.86 && ids.length > 0) {
      const id = pick(ids);
      const change = next() < 0.5 ? { price: pick(prices) } : { volume: pick(volumes) };
      // The owner is unknown here; another user's amend is refused the same way each time.
      commands.push(amend(id, change, pick(users), pairId));
    } else if (r < 0.94 && ids.length > 0) {
      commands.push(cancel(pick(ids), pick(users), pairId));
    } else if (r < 0.97) {
      commands.push(cancelAll(pick(users), next() < 0.5 ? pairId : undefined, pairId));
    } else {
      // Mostly resumes, so a pair is halted about a sixth of the time.
      commands.push(pairControl(next() < 0.15 ? "pair.halt" : "pair.resume", pairId));
    }
  }
  // Past every deadline: everything good-till-date goes, a tick's 1,000 at a time.
  commands.push(tick(now + MAX_EXPIRY_AHEAD_MS), tick(now + MAX_EXPIRY_AHEAD_MS + 1));
  return commands;
}

/**
 * Applies `commands` as the conductor does, with its accepted-order markers (so an engine
 * reloaded without the finished ids it remembered answers as one that never stopped), and
 * returns the transcript of results and events.
 */
function feed(engine: MatchingEngine, commands: CommandEnvelope[], accepted: Set<string>): string {
  const parts: string[] = [];
  for (const command of commands) {
    // A list names two orders: either accepted before marks it.
    const ids =
      command.type === "order.place-oco"
        ? command.payload.legs.map((leg) => leg.id)
        : "id" in command.payload
          ? [command.payload.id]
          : [];
    const outcome = engine.apply(
      command,
      ids.some((id) => accepted.has(id)),
    );
    if (outcome.acceptedOrderId !== undefined) accepted.add(outcome.acceptedOrderId);
    if (outcome.alsoAcceptedOrderId !== undefined) accepted.add(outcome.alsoAcceptedOrderId);
    parts.push(JSON.stringify(outcome.result), JSON.stringify(outcome.events));
  }
  return parts.join("\n");
}

/**
 * A fresh engine loaded as the conductor reloads: books, stops, halts, dead-man's switches and
 * unfinished sweeps, and the clock.
 */
function reload(from: MatchingEngine): MatchingEngine {
  const engine = new MatchingEngine();
  for (const order of [...from.restingOrders()].reverse()) engine.loadRestingOrder(order);
  for (const stop of [...from.stopOrders()].reverse()) engine.loadStopOrder(stop);
  for (const halt of from.haltedPairs()) engine.loadHalt(halt.pairId, halt.reason);
  for (const [userId, deadline] of [...from.switches()].reverse())
    engine.loadSwitch(userId, deadline);
  for (const [userId, deadline] of [...from.sweeps()].reverse()) engine.loadSweep(userId, deadline);
  engine.loadClock(from.now());
  return engine;
}

describe("a script with recorded times", () => {
  const commands = timedScript(11, 4000);

  test("replays byte-identically, expiries included", () => {
    const first = new MatchingEngine();
    const second = new MatchingEngine();
    const transcript = feed(first, commands, new Set());
    expect(feed(second, commands, new Set())).toBe(transcript);
    expect(second.digest()).toBe(first.digest());
    expect(second.now()).toBe(first.now());
    first.check();
    // The script did what it is for: orders and stops expired, deadlines were refused, stops
    // triggered, switches were armed, refused and fired, and took their users' orders.
    const count = (text: string) => transcript.split(text).length - 1;
    expect(count('"type":"order.expired.v1"')).toBeGreaterThan(300);
    expect(count('"codeName":"expiry-in-past"')).toBeGreaterThan(10);
    expect(count('"codeName":"expiry-too-far"')).toBeGreaterThan(10);
    expect(count('"triggeredStops"')).toBeGreaterThan(10);
    expect(count('"triggerAt":')).toBeGreaterThan(20);
    expect(count('"codeName":"bad-timeout"')).toBeGreaterThan(0);
    expect(count('"type":"session.triggered.v1"')).toBeGreaterThan(5);
    expect(count('"reason":"cancel-after"')).toBeGreaterThan(50);
    // Icebergs showed their next parts; lists waited linked and ended, by fills, triggers,
    // cancels and expiries.
    expect(count('"displayVolume"')).toBeGreaterThan(150);
    expect(count('"hiddenVolume"')).toBeGreaterThan(300);
    expect(count('"listId"')).toBeGreaterThan(40);
    expect(count('"reason":"oco"')).toBeGreaterThan(40);
    // The last ticks took every good-till-date order and stop, and fired every switch.
    expect(first.nextExpiry()).toBeUndefined();
    expect([...first.restingOrders()].every((o) => o.expireAt === undefined)).toBe(true);
    expect([first.switches().size, first.sweeps().size]).toEqual([0, 0]);
  });

  test.each([1, 700, 1500, 2222, 3333])(
    "an engine reloaded after command %i goes on as the uninterrupted one",
    (at) => {
      const whole = new MatchingEngine();
      const accepted = new Set<string>();
      feed(whole, commands.slice(0, at), accepted);
      const reloaded = reload(whole);
      reloaded.check();
      expect(reloaded.digest()).toBe(whole.digest());
      expect(reloaded.now()).toBe(whole.now());
      expect(reloaded.nextExpiry()).toBe(whole.nextExpiry());
      expect([...reloaded.switches()].sort()).toEqual([...whole.switches()].sort());
      expect([...reloaded.sweeps()].sort()).toEqual([...whole.sweeps()].sort());
      const rest = commands.slice(at);
      const expected = feed(whole, rest, new Set(accepted));
      expect(feed(reloaded, rest, accepted)).toBe(expected);
      reloaded.check();
      expect(reloaded.digest()).toBe(whole.digest());
    },
  );
});

test("the digest tells apart books that differ only in a deadline", () => {
  const digestOf = (payload: Partial<PlaceOrderPayload>): string => {
    const engine = new MatchingEngine();
    engine.apply(tick(T0));
    const outcome = engine.apply(place({ id: "p", timestamp: 1_704_067_200_000, ...payload }));
    expect(outcome.result.status).toBe("accepted");
    return engine.digest();
  };
  const gtc = digestOf({});
  const at = (expireAt: number) => digestOf({ timeInForce: "gtd", expireAt });
  expect(at(T0 + 1)).not.toBe(gtc);
  expect(at(T0 + 1)).not.toBe(at(T0 + 2));
  expect(at(T0 + 1)).toBe(at(T0 + 1));
  const stop = { type: "stop-limit" as const, stopPrice: "200" };
  expect(digestOf({ ...stop, timeInForce: "gtd", expireAt: T0 + 1 })).not.toBe(
    digestOf({ ...stop, timeInForce: "gtd", expireAt: T0 + 2 }),
  );
});
