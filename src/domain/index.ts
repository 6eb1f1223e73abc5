// Public surface of the pure matching domain; everything outside src/domain imports from here.

export { formatScaled, MAX_DECIMALS, MAX_INTEGER_DIGITS, parseScaled } from "./decimal-scale";
export { type DecodeResult, decodeCommand } from "./decode-command";
export {
  type DigestOrder,
  type DigestSessions,
  type DigestStop,
  DigestSum,
  digestBooks,
  digestOrders,
  Fnv1a64,
} from "./digest";
export * from "./events";
export { MatchingInvariantError } from "./invariant-error";
export {
  EMPTY_BOOKS_SWEEP_FLOOR,
  MAX_CANCEL_AFTER_MS,
  MAX_CANCEL_ALL,
  MAX_EXPIRIES,
  MAX_EXPIRY_AHEAD_MS,
  MAX_STOP_TRIGGERS,
  MatchingEngine,
  type MatchingEngineOptions,
  MIN_CANCEL_AFTER_MS,
  type RejectTarget,
} from "./matching-engine";
export * from "./result-codes";
export * from "./types";
