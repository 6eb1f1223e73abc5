// The incoming order's mutable state while it matches, reset for every command.

import type { Scaled } from "./decimal-scale";
import type { Side } from "./types";

/**
 * The mutable state of the incoming order while it matches. The engine applies one command at a
 * time and nothing keeps a reference to it, so one instance is reset per command.
 */
export class Taker {
  id = "";
  /** hashId(id), computed once for the index lookup and reused to rest or finish the order. */
  idHash = 0;
  userId = "";
  side: Side = "bid";
  limit = false;
  price: Scaled = 0;
  priceText = "";
  remaining: Scaled = 0;
  remainingText = "";
  budget: Scaled = 0;
  quoteSized = false;
  executed: Scaled = 0;
  volumeTotal: Scaled = 0;
  volumeTotalText = "";
  accepted: Scaled = 0;
  timestamp = 0;
  /** The taker's trades so far, which the stop trigger check reads once it is done. */
  traded = false;
  tradeHigh: Scaled = 0;
  tradeLow: Scaled = 0;
  tradeLast: Scaled = 0;
  tradeLastText = "";
}
