// The engine's whole state in one object: books, the id index, stops, halts, the level
// digests and the scratch the place path reuses. The engine's parts take it as their first
// argument; nothing else holds state. No I/O, no clock.

import { EventLog } from "./events";
import { type ExpiryEntry, ExpiryQueue } from "./expiry-queue";
import { LevelDigests } from "./level-digests";
import { type OrderNode, PairBook } from "./order-book";
import { FINISHED, OrderIndex } from "./order-index";
import type { StopNode } from "./stop-book";
import { Taker } from "./taker";
import { PlaceValidator } from "./validate-place";

export interface MatchingEngineOptions {
  /** Bound on remembered accepted / finished order ids (duplicate and cancel detection). */
  recentMemory?: number;
}

/** Books held before empty ones are first swept; a sweep never lowers the bound below it. */
export const EMPTY_BOOKS_SWEEP_FLOOR = 1024;

/** Stand-in for a command's time when it has none: documented, stable, never a clock. */
export const EPOCH_ISO = "1970-01-01T00:00:00.000Z";

export class EngineState {
  readonly books = new Map<number, PairBook>();

  /** Resting orders and recently finished ids, one lookup for both. */
  readonly orders: OrderIndex;

  /** The next order or stop's time priority. */
  nextSequence = 1;

  /** The incoming order while it matches, reset for every command. */
  readonly taker = new Taker();

  readonly validator = new PlaceValidator();

  /** One event log reused by every accepted command; each command still gets its own array. */
  readonly eventLog = new EventLog({
    commandId: "",
    correlationId: "",
    partition: 0,
    pairId: 0,
    submittedAt: EPOCH_ISO,
  });

  /** The book of the last command: consecutive commands usually trade the same pair. */
  lastBook: PairBook | undefined;

  /** Books held when the next new book first sweeps the empty ones (see dropEmptyBooks). */
  sweepBooksAt = EMPTY_BOOKS_SWEEP_FLOOR;

  /** Keeps the books' digest current as levels change (see LevelDigests). */
  readonly levelDigests = new LevelDigests();

  /** Stop orders by id; each is also in its pair's stop book. */
  readonly stops = new Map<string, StopNode>();

  /** Halted pairs and why. */
  readonly halts = new Map<number, string>();

  /**
   * Stops plus halted pairs, kept as a plain number: every place reads it, and a Map's size
   * getter there cost a measurable share of the alternating bench. Call recountExtras after
   * changing either.
   */
  extras = 0;

  /**
   * The engine's time, epoch milliseconds: the latest clock.tick's `now` (0 before the
   * first). Only ticks move it, and never backwards.
   */
  now = 0;

  /** Armed good-till-date orders and stops by deadline (see ExpiryQueue). */
  readonly expiries = new ExpiryQueue();

  /** Armed dead-man's switches: user id to deadline (session.cancel-after). */
  readonly switches = new Map<string, number>();

  /** The switches by deadline; an entry goes stale when its switch is renewed or disarmed. */
  readonly switchDeadlines = new ExpiryQueue();

  /** Users whose switch fired and whose orders are still being cancelled, to its deadline. */
  readonly sweeps = new Map<string, number>();

  constructor({ recentMemory = 100_000 }: MatchingEngineOptions = {}) {
    this.orders = new OrderIndex(recentMemory);
  }

  recountExtras(): void {
    this.extras = this.stops.size + this.halts.size;
  }

  /** Arms a good-till-date order or stop at its current sequence; others are ignored. */
  armExpiry(node: { expireAt: number; sequence: number; id: string }): void {
    if (node.expireAt === 0) return;
    if (this.expiries.wantsCompaction) this.expiries.compact((e) => this.armed(e) !== undefined);
    this.expiries.push(node.expireAt, node.sequence, node.id);
  }

  /** The resting order or the stop of this id; undefined when neither waits. */
  waitingOrder(id: string): OrderNode | StopNode | undefined {
    const node = this.orders.get(id);
    return node !== undefined && node !== FINISHED ? node : this.stops.get(id);
  }

  /** The resting order or stop an entry still arms, or undefined when it went stale. */
  armed(entry: ExpiryEntry): OrderNode | StopNode | undefined {
    const found = this.waitingOrder(entry.id);
    if (found === undefined) return undefined;
    return found.expireAt === entry.at && found.sequence === entry.sequence ? found : undefined;
  }

  /** Arms (or renews) a user's dead-man's switch. */
  armSwitch(userId: string, deadline: number): void {
    this.switches.set(userId, deadline);
    const queue = this.switchDeadlines;
    if (queue.wantsCompaction) queue.compact((e) => this.switches.get(e.id) === e.at);
    queue.push(deadline, 0, userId);
  }

  /** The earliest good-till-date deadline still armed, dropping stale entries on the way. */
  nextOrderExpiry(): number | undefined {
    for (;;) {
      const head = this.expiries.peek();
      if (head === undefined) return undefined;
      if (this.armed(head) !== undefined) return head.at;
      this.expiries.pop();
    }
  }

  /** The earliest armed switch's deadline, dropping stale entries on the way. */
  nextSwitch(): { at: number; userId: string } | undefined {
    for (;;) {
      const head = this.switchDeadlines.peek();
      if (head === undefined) return undefined;
      if (this.switches.get(head.id) === head.at) return { at: head.at, userId: head.id };
      this.switchDeadlines.pop();
    }
  }

  /**
   * When the next clock.tick has work: the earliest armed deadline, or the engine's time
   * while a fired switch still has orders to cancel; undefined: nothing is armed.
   */
  nextExpiry(): number | undefined {
    const order = this.nextOrderExpiry();
    const session = this.sweeps.size > 0 ? this.now : this.nextSwitch()?.at;
    if (order === undefined) return session;
    return session === undefined ? order : Math.min(order, session);
  }

  bookOf(pairId: number): PairBook | undefined {
    const last = this.lastBook;
    if (last !== undefined && last.pairId === pairId) return last;
    const book = this.books.get(pairId);
    if (book !== undefined) this.lastBook = book;
    return book;
  }

  createBook(pairId: number): PairBook {
    if (this.books.size >= this.sweepBooksAt) this.dropEmptyBooks();
    const book = new PairBook(pairId, this.levelDigests);
    this.books.set(pairId, book);
    this.lastBook = book;
    return book;
  }

  dropEmptyBook(pairId: number): void {
    const book = this.books.get(pairId);
    if (book === undefined || !book.empty) return;
    this.books.delete(pairId);
    if (this.lastBook === book) this.lastBook = undefined;
  }

  /**
   * Drops every book whose last order left. They are kept until then because a pair that
   * empties usually refills at once (the alternating workload empties its book every second
   * command), but pairs that come and go would otherwise leave one empty book each for ever.
   * The next sweep waits until the books have doubled, so sweeping costs O(1) per book made,
   * and the engine never holds more than max(EMPTY_BOOKS_SWEEP_FLOOR, 2 x the non-empty
   * books at the last sweep) books. A dropped book forgets nothing that matters: precisions
   * are compared only with resting orders.
   */
  dropEmptyBooks(): void {
    for (const [pairId, book] of this.books) {
      if (book.empty) this.books.delete(pairId);
    }
    if (this.lastBook?.empty) this.lastBook = undefined;
    this.sweepBooksAt = Math.max(EMPTY_BOOKS_SWEEP_FLOOR, 2 * this.books.size);
  }

  /** The books that hold something, pairs ascending. */
  sortedBooks(): PairBook[] {
    return [...this.books.values()].filter((b) => !b.empty).sort((a, b) => a.pairId - b.pairId);
  }

  /** Forgets everything, as a new engine would start. */
  clear(): void {
    this.books.clear();
    this.levelDigests.reset();
    this.lastBook = undefined;
    this.sweepBooksAt = EMPTY_BOOKS_SWEEP_FLOOR;
    this.orders.clear();
    this.stops.clear();
    this.halts.clear();
    this.recountExtras();
    this.nextSequence = 1;
    this.now = 0;
    this.expiries.clear();
    this.switches.clear();
    this.switchDeadlines.clear();
    this.sweeps.clear();
  }
}
