// One pair's stop orders, sorted so that the stops a trade triggers are a prefix of each
// side: buy stops by stop price ascending, sell stops descending, arrival breaking ties.

import { type Scaled, subScaled } from "./decimal-scale";
import { invariant } from "./invariant-error";
import type { Side, StopKind, StopOrder, StpMode, TimeInForce } from "./types";

/** A stop order as the engine holds it: scaled integers beside their canonical texts. */
export interface StopNode {
  id: string;
  userId: string;
  pairId: number;
  side: Side;
  type: StopKind;
  /** 0 for stop-market. */
  price: Scaled;
  priceText: string;
  stopPrice: Scaled;
  stopPriceText: string;
  /** Unfilled volume (0 for a quote-sized stop-market bid). */
  volume: Scaled;
  volumeText: string;
  volumeTotal: Scaled;
  volumeTotalText: string;
  quoteVolume: Scaled;
  quoteVolumeText: string;
  quoteSized: boolean;
  timeInForce: TimeInForce;
  stp: StpMode;
  timestamp: number;
  sequence: number;
  priceDecimals: number;
  amountDecimals: number;
  quoteDecimals: number;
  /** A good-till-date stop's deadline, epoch milliseconds; 0 for every other stop. */
  expireAt: number;
  /** A one-cancels-other leg's list id and the other leg's order id; "" for other stops. */
  listId: string;
  linked: string;
}

export function toStopOrder(node: StopNode): StopOrder {
  const stop: StopOrder = {
    id: node.id,
    userId: node.userId,
    pairId: node.pairId,
    side: node.side,
    type: node.type,
    price: node.priceText,
    stopPrice: node.stopPriceText,
    volume: node.volumeText,
    volumeTotal: node.volumeTotalText,
    quoteVolume: node.quoteVolumeText,
    timeInForce: node.timeInForce,
    stp: node.stp,
    timestamp: node.timestamp,
    sequence: node.sequence,
    priceDecimals: node.priceDecimals,
    amountDecimals: node.amountDecimals,
    quoteDecimals: node.quoteDecimals,
  };
  // Only when set: every other stop keeps the shape (and digest) it always had.
  if (node.expireAt !== 0) stop.expireAt = node.expireAt;
  if (node.linked !== "") {
    stop.listId = node.listId;
    stop.linkedOrderId = node.linked;
  }
  return stop;
}

/** The trades of one taker, as the trigger check reads them. */
export interface TradeRange {
  high: Scaled;
  low: Scaled;
  last: Scaled;
}

export class StopBook {
  /** Buy stops, stop price ascending then arrival: a trade at or above a prefix triggers it. */
  readonly bids: StopNode[] = [];
  /** Sell stops, stop price descending then arrival: a trade at or below a prefix triggers it. */
  readonly asks: StopNode[] = [];

  /** Stops held: a field, not a getter, since every place on the pair reads it. */
  size = 0;

  insert(node: StopNode): void {
    const list = node.side === "bid" ? this.bids : this.asks;
    list.splice(this.search(list, node), 0, node);
    this.size++;
  }

  remove(node: StopNode): void {
    const list = node.side === "bid" ? this.bids : this.asks;
    const at = this.search(list, node);
    invariant(list[at] === node, () => `stop ${node.id} is not in its stop book`);
    list.splice(at, 1);
    this.size--;
  }

  /**
   * The stops a taker's trades trigger, at most `limit`, in trigger order: distance between
   * stop price and the last trade ascending, then arrival. Nothing is removed.
   */
  triggered(trades: TradeRange, limit: number): StopNode[] {
    const picks: StopNode[] = [];
    for (const node of this.bids) {
      if (node.stopPrice > trades.high) break;
      picks.push(node);
    }
    for (const node of this.asks) {
      if (node.stopPrice < trades.low) break;
      picks.push(node);
    }
    picks.sort((a, b) => {
      const da = distance(a.stopPrice, trades.last);
      const db = distance(b.stopPrice, trades.last);
      return da < db ? -1 : da > db ? 1 : a.sequence - b.sequence;
    });
    return picks.length > limit ? picks.slice(0, limit) : picks;
  }

  /** Every stop of the pair in arrival order. */
  byArrival(): StopNode[] {
    return [...this.bids, ...this.asks].sort((a, b) => a.sequence - b.sequence);
  }

  /** Checks the sort order of both sides; returns the number of stops. */
  check(pairId: number): number {
    for (const [side, list] of [
      ["bid", this.bids],
      ["ask", this.asks],
    ] as const) {
      for (let i = 0; i < list.length; i++) {
        const node = list[i]!;
        invariant(node.side === side && node.pairId === pairId, () => `stop ${node.id} misplaced`);
        invariant(
          node.quoteSized ? node.quoteVolume > 0 : node.volume > 0,
          () => `stop ${node.id} waits with nothing to trade`,
        );
        if (i > 0)
          invariant(before(side, list[i - 1]!, node), () => `stop ${node.id} out of order`);
      }
    }
    invariant(this.size === this.bids.length + this.asks.length, () => "stop count drifted");
    return this.size;
  }

  /** First index whose stop does not sort before `node`. */
  private search(list: StopNode[], node: StopNode): number {
    let low = 0;
    let high = list.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (before(node.side, list[mid]!, node)) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}

/** True when `a` sorts before `b` on a side of the stop book. */
function before(side: Side, a: StopNode, b: StopNode): boolean {
  if (a.stopPrice !== b.stopPrice) {
    return side === "bid" ? a.stopPrice < b.stopPrice : a.stopPrice > b.stopPrice;
  }
  return a.sequence < b.sequence;
}

function distance(a: Scaled, b: Scaled): Scaled {
  return a >= b ? subScaled(a, b) : subScaled(b, a);
}
