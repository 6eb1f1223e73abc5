// The single-threaded matching engine: applies one command at a time to in-memory books and
// returns events, book changes and a result. No I/O, no clock, no randomness. Its state is one
// EngineState; each command and query is a part of its own file that takes it.

import { amend } from "./amend";
import { cancel, cancelAll } from "./cancel";
import { checkDigest, checkState, digest, digestStep } from "./engine-check";
import { EngineState, type MatchingEngineOptions } from "./engine-state";
import type { EventSource } from "./events";
import { tick } from "./expire";
import { pairControl } from "./halts";
import {
  loadClock,
  loadHalt,
  loadRestingOrder,
  loadStopOrder,
  loadSweep,
  loadSwitch,
} from "./load";
import { placeOco } from "./oco";
import { type RejectTarget, reject } from "./outcomes";
import { place } from "./place";
import * as queries from "./queries";
import { type ResultCode, ResultCodes } from "./result-codes";
import { cancelAfter } from "./sessions";
import type {
  CommandEnvelope,
  CommandOutcome,
  Depth,
  HaltedPair,
  RestingOrder,
  StopDepthLevel,
  StopOrder,
} from "./types";

export { MAX_CANCEL_ALL } from "./cancel";
export { EMPTY_BOOKS_SWEEP_FLOOR, type MatchingEngineOptions } from "./engine-state";
export { MAX_EXPIRIES } from "./expire";
export type { RejectTarget } from "./outcomes";
export { MAX_EXPIRY_AHEAD_MS } from "./place";
export { MAX_CANCEL_AFTER_MS, MIN_CANCEL_AFTER_MS } from "./sessions";
export { MAX_STOP_TRIGGERS } from "./stops";

export class MatchingEngine {
  /**
   * Everything the engine holds. Public so that checks and tests can read it (and a test can
   * corrupt it, to see an invariant catch that); only apply and the loads change it.
   */
  readonly state: EngineState;

  constructor(options: MatchingEngineOptions = {}) {
    this.state = new EngineState(options);
  }

  /**
   * `alreadyAccepted`: the shell's stored marker says an order with the command's order id was
   * accepted before (beyond what this engine remembers): a place of it is a duplicate, and a
   * cancel of it, unless it rests, finds it finished rather than unknown.
   */
  apply(command: CommandEnvelope, alreadyAccepted = false): CommandOutcome {
    const s = this.state;
    if (command.type === "order.place") return place(s, command, alreadyAccepted);
    if (command.type === "order.cancel") return cancel(s, command, alreadyAccepted);
    if (command.type === "order.amend") return amend(s, command, alreadyAccepted);
    if (command.type === "order.cancel-all") return cancelAll(s, command);
    if (command.type === "pair.halt" || command.type === "pair.resume") {
      return pairControl(s, command);
    }
    if (command.type === "clock.tick") return tick(s, command);
    if (command.type === "session.cancel-after") return cancelAfter(s, command);
    if (command.type === "order.place-oco") return placeOco(s, command, alreadyAccepted);
    const unknown = command as { type?: unknown };
    return reject(
      command,
      ResultCodes.unknownCommandType,
      `unknown command type ${String(unknown.type)}`,
    );
  }

  /** Builds the order.rejected.v1 outcome for a command refused before or by the engine. */
  reject(target: CommandEnvelope | RejectTarget, code: ResultCode, reason: string): CommandOutcome {
    return reject(target, code, reason);
  }

  /** Books held, empty ones included (see EngineState.dropEmptyBooks). */
  bookCount(): number {
    return this.state.books.size;
  }

  /** Rebuilds state from the datastore; the next sequence stays above every loaded one. */
  loadRestingOrder(order: RestingOrder): void {
    loadRestingOrder(this.state, order);
  }

  /** Rebuilds a stop order from the datastore; the next sequence stays above it. */
  loadStopOrder(stop: StopOrder): void {
    loadStopOrder(this.state, stop);
  }

  /** The engine's time: the latest clock.tick's `now`, epoch milliseconds (0 before one). */
  now(): number {
    return this.state.now;
  }

  /** The earliest deadline of an armed good-till-date order or stop; undefined: none. */
  nextExpiry(): number | undefined {
    return this.state.nextExpiry();
  }

  /** Restores the engine's time from the datastore; it never goes back. */
  loadClock(now: number): void {
    loadClock(this.state, now);
  }

  /** Rebuilds a user's armed dead-man's switch from the datastore. */
  loadSwitch(userId: string, deadline: number): void {
    loadSwitch(this.state, userId, deadline);
  }

  /** Rebuilds a fired switch whose user's orders are still being cancelled. */
  loadSweep(userId: string, deadline: number): void {
    loadSweep(this.state, userId, deadline);
  }

  /** Armed dead-man's switches, by user id: their deadlines. */
  switches(): ReadonlyMap<string, number> {
    return this.state.switches;
  }

  /** Fired switches whose users' orders are still being cancelled. */
  sweeps(): ReadonlyMap<string, number> {
    return this.state.sweeps;
  }

  /** Rebuilds a pair's halt from the datastore. */
  loadHalt(pairId: number, reason: string): void {
    loadHalt(this.state, pairId, reason);
  }

  /** Every stop order: pairs ascending, arrival order within a pair. */
  stopOrders(): Generator<StopOrder> {
    return queries.stopOrders(this.state);
  }

  /** One pair's stop orders in arrival order. */
  stopOrdersOf(pairId: number): StopOrder[] {
    return queries.stopOrdersOf(this.state, pairId);
  }

  /** A pair's stops by stop price, nearest to triggering first, at most `levels` a side. */
  stopDepth(pairId: number, levels: number): StopDepthLevel[] {
    return queries.stopDepth(this.state, pairId, levels);
  }

  getStopOrder(orderId: string): StopOrder | undefined {
    return queries.getStopOrder(this.state, orderId);
  }

  stopOrderCount(pairId?: number): number {
    return queries.stopOrderCount(this.state, pairId);
  }

  /** Halted pairs, ascending. */
  haltedPairs(): HaltedPair[] {
    return queries.haltedPairs(this.state);
  }

  /** Every resting order, in canonical order (pairs ascending, bids then asks, best first, FIFO). */
  restingOrders(): Generator<RestingOrder> {
    return queries.restingOrders(this.state);
  }

  restingOrderCount(pairId?: number): number {
    return queries.restingOrderCount(this.state, pairId);
  }

  getOrder(orderId: string): RestingOrder | undefined {
    return queries.getOrder(this.state, orderId);
  }

  /** Aggregated top `levels` price levels per side, best first. */
  depth(pairId: number, levels: number): Depth {
    return queries.depth(this.state, pairId, levels);
  }

  /** Validates every book and the id index; throws MatchingInvariantError on the first fault. */
  check(): void {
    checkState(this.state);
  }

  /** The digest kept level by level against one hashed afresh (see engine-check.ts). */
  checkDigest(): void {
    checkDigest(this.state);
  }

  /** Canonical digest of all books, independent of absolute sequence numbers. */
  digest(): string {
    return digest(this.state);
  }

  /**
   * One bounded step towards a current digest: hashes changed levels until about `maxOrders`
   * orders were hashed. True once digest() would answer at once.
   */
  digestStep(maxOrders: number): boolean {
    return digestStep(this.state, maxOrders);
  }

  clear(): void {
    this.state.clear();
  }
}

export type { EventSource };
