// Checks a stop order read back from the datastore and turns it into the engine's node: a
// stored stop outside the bounds a placed one passed was never accepted, and fails the load.

import { formatValue, parseScaledValue, type Scaled } from "./decimal-scale";
import { MatchingInvariantError } from "./invariant-error";
import type { StopNode } from "./stop-book";
import type { StopOrder } from "./types";
import { validDecimals } from "./validate-place";

const stopKinds: ReadonlySet<string> = new Set(["stop-limit", "stop-market"]);
const timesInForce: ReadonlySet<string> = new Set(["gtc", "ioc", "fok", "gtd"]);
const stpModes: ReadonlySet<string> = new Set([
  "none",
  "cancel-taker",
  "cancel-maker",
  "cancel-both",
]);

export function parseStoredStop(stop: StopOrder): StopNode {
  const fail = (why: string): never => {
    throw new MatchingInvariantError(`cannot load stop order ${stop.id}: ${why}`);
  };
  if (!validDecimals(stop.priceDecimals)) fail("bad priceDecimals (0..18)");
  if (!validDecimals(stop.amountDecimals)) fail("bad amountDecimals (0..18)");
  if (!validDecimals(stop.quoteDecimals)) fail("bad quoteDecimals (0..18)");
  if (!Number.isSafeInteger(stop.pairId) || stop.pairId <= 0) fail("bad pairId");
  if (!Number.isSafeInteger(stop.timestamp) || stop.timestamp < 0) fail("bad timestamp");
  if (!Number.isSafeInteger(stop.sequence) || stop.sequence < 0) fail("bad sequence");
  if (stop.side !== "bid" && stop.side !== "ask") fail("bad side");
  if (!stopKinds.has(stop.type)) fail("bad type");
  if (!timesInForce.has(stop.timeInForce)) fail("bad timeInForce");
  if (!stpModes.has(stop.stp)) fail("bad stp mode");
  const value = (field: string, text: string, decimals: number): Scaled => {
    const parsed = parseScaledValue(text, decimals);
    return typeof parsed === "object" ? fail(`bad ${field}`) : parsed;
  };
  const price = value("price", stop.price, stop.priceDecimals);
  const stopPrice = value("stopPrice", stop.stopPrice, stop.priceDecimals);
  const volume = value("volume", stop.volume, stop.amountDecimals);
  const volumeTotal = value("volumeTotal", stop.volumeTotal, stop.amountDecimals);
  const quoteVolume = value("quoteVolume", stop.quoteVolume, stop.quoteDecimals);
  const limit = stop.type === "stop-limit";
  if (limit ? price <= 0 : price !== 0) fail("bad price");
  if (stopPrice <= 0) fail("bad stopPrice");
  const quoteSized = !limit && stop.side === "bid" && quoteVolume > 0;
  if (quoteSized ? volume !== 0 : volume <= 0) fail("bad volume");
  if (volume > volumeTotal) fail("volume above volumeTotal");
  const expireAt = stop.expireAt ?? 0;
  if (!Number.isSafeInteger(expireAt) || expireAt < 0) fail("bad expireAt");
  if ((expireAt !== 0) !== (stop.timeInForce === "gtd"))
    fail("expireAt without gtd, or gtd without it");
  return {
    id: stop.id,
    userId: stop.userId,
    pairId: stop.pairId,
    side: stop.side,
    type: stop.type,
    price,
    priceText: formatValue(price, stop.priceDecimals),
    stopPrice,
    stopPriceText: formatValue(stopPrice, stop.priceDecimals),
    volume,
    volumeText: formatValue(volume, stop.amountDecimals),
    volumeTotal,
    volumeTotalText: formatValue(volumeTotal, stop.amountDecimals),
    quoteVolume,
    quoteVolumeText: formatValue(quoteVolume, stop.quoteDecimals),
    quoteSized,
    timeInForce: stop.timeInForce,
    stp: stop.stp,
    timestamp: stop.timestamp,
    sequence: stop.sequence,
    priceDecimals: stop.priceDecimals,
    amountDecimals: stop.amountDecimals,
    quoteDecimals: stop.quoteDecimals,
    expireAt,
    listId: stop.listId ?? "",
    linked: stop.linkedOrderId ?? "",
  };
}
