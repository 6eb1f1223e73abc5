// The engine's invariants, checked on demand, and its digest: kept current level by level,
// and checked against one hashed afresh.

import { addHaltsDigest, addSessionsDigest, addStopsDigest, digestBooks } from "./digest";
import type { EngineState } from "./engine-state";
import { invariant } from "./invariant-error";
import { haltedPairs, restingOrders, stopOrders } from "./queries";

/** Validates every book and the id index; throws MatchingInvariantError on the first fault. */
export function checkState(s: EngineState): void {
  let total = 0;
  for (const book of s.books.values()) total += book.check();
  const indexed = s.orders.resting;
  invariant(total === indexed, () => `index holds ${indexed}, books ${total}`);
  let seen = 0;
  for (const [id, node] of s.orders.restingNodes()) {
    seen++;
    invariant(node.id === id && node.level !== null, () => `index entry ${id} not resting`);
    invariant(s.books.get(node.pairId) !== undefined, () => `order ${id} has no book`);
    // An iceberg shows at most its display, and hides nothing while it shows less than it
    // may unless a fill took part of what it shows; a plain order hides nothing.
    invariant(
      node.display === 0 ? node.hidden === 0 : node.remaining <= node.display && node.hidden >= 0,
      () => `order ${id} shows ${node.remaining} of display ${node.display}, hides ${node.hidden}`,
    );
  }
  invariant(seen === indexed, () => `index counts ${indexed} resting orders, holds ${seen}`);
  let stops = 0;
  for (const book of s.books.values()) {
    stops += book.stops.check(book.pairId);
    for (const stop of [...book.stops.bids, ...book.stops.asks]) {
      invariant(s.stops.get(stop.id) === stop, () => `stop ${stop.id} is not indexed`);
      invariant(s.orders.get(stop.id) === undefined, () => `stop ${stop.id} is an order too`);
    }
  }
  invariant(stops === s.stops.size, () => `${s.stops.size} stops indexed, ${stops} held`);
  const extras = s.stops.size + s.halts.size;
  invariant(s.extras === extras, () => `extras counts ${s.extras}, holds ${extras}`);
  // Equal counts are not enough: every order in a book must be the very node its id finds,
  // or a cancel would unlink a stale node and leave the real one resting.
  for (const book of s.books.values()) {
    for (const node of book.canonicalOrders()) {
      invariant(
        s.orders.get(node.id) === node,
        () => `order ${node.id} in the book is not the one its id finds`,
      );
    }
  }
  checkExpiries(s);
  checkLinks(s);
  for (const [userId, deadline] of s.switches) {
    const armed = s.switchDeadlines.entries().some((e) => e.id === userId && e.at === deadline);
    invariant(armed, () => `the switch of ${userId} (${deadline}) is not armed`);
  }
}

/** Every one-cancels-other leg's other leg waits too, linked back, of the same user and list. */
function checkLinks(s: EngineState): void {
  const nodes = [...[...s.orders.restingNodes()].map(([, node]) => node), ...s.stops.values()];
  for (const node of nodes) {
    if (node.linked === "") continue;
    const other = s.waitingOrder(node.linked);
    invariant(
      other !== undefined &&
        other.linked === node.id &&
        other.userId === node.userId &&
        other.listId === node.listId,
      () => `order ${node.id} is linked to ${node.linked}, which is not linked back`,
    );
  }
}

/** Every good-till-date order and stop is armed at its deadline and current sequence. */
function checkExpiries(s: EngineState): void {
  const armed = new Set<string>();
  for (const entry of s.expiries.entries()) {
    if (s.armed(entry) !== undefined) armed.add(`${entry.at}|${entry.sequence}|${entry.id}`);
  }
  const gtd = [...s.orders.restingNodes()].map(([, node]) => node).filter((n) => n.expireAt !== 0);
  for (const stop of s.stops.values()) {
    invariant(
      (stop.expireAt !== 0) === (stop.timeInForce === "gtd"),
      () => `stop ${stop.id}: expireAt ${stop.expireAt} with timeInForce ${stop.timeInForce}`,
    );
  }
  for (const node of [...gtd, ...[...s.stops.values()].filter((n) => n.expireAt !== 0)]) {
    invariant(
      armed.has(`${node.expireAt}|${node.sequence}|${node.id}`),
      () => `order ${node.id} expires at ${node.expireAt} but is not armed`,
    );
  }
}

/**
 * The digest kept level by level must be the one hashed afresh: a change that marked no level
 * would leave it stale. Apart from check(), which the conductor runs at every load: this
 * hashes every order twice.
 */
export function checkDigest(s: EngineState): void {
  const kept = digest(s);
  const fresh = digestBooks(restingOrders(s), stopOrders(s), haltedPairs(s), s);
  invariant(kept === fresh, () => `kept digest ${kept}, books hash to ${fresh}`);
}

/**
 * Canonical digest of all books, independent of absolute sequence numbers: the sum of each
 * price level's FNV-1a 64 hash (see digestOrders). Kept current level by level, so it costs
 * the levels changed since it was last asked for.
 */
export function digest(s: EngineState): string {
  while (!s.levelDigests.step(Number.POSITIVE_INFINITY));
  const sessions = s.switches.size + s.sweeps.size;
  if (s.stops.size === 0 && s.halts.size === 0 && sessions === 0) return s.levelDigests.hex();
  // Stops, halts and switches are few: hashed afresh each time, onto the levels' sum.
  const sum = s.levelDigests.copySum();
  addStopsDigest(sum, stopOrders(s));
  addHaltsDigest(sum, haltedPairs(s));
  addSessionsDigest(sum, s);
  return sum.hex();
}

/**
 * One bounded step towards a current digest: hashes changed levels until about `maxOrders`
 * orders were hashed. True once digest() would answer at once. For a caller that yields
 * between steps, so that a deep book never holds up matching.
 */
export function digestStep(s: EngineState, maxOrders: number): boolean {
  return s.levelDigests.step(maxOrders);
}
