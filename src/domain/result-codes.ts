// The stable table of result codes, grouped by kind: 0 ok, 1xx accepted variants, 2xx validation
// rejects, 3xx business rejects, 4xx duplicates. Numbers never change once published.

export const ResultCodes = {
  ok: 0,
  // 1xx: accepted order.place variants.
  rested: 100,
  partiallyFilledRested: 101,
  filled: 102,
  remainderCancelled: 103,
  fokNotFilled: 104,
  stpCancelled: 105,
  stopAccepted: 106,
  amendUnchanged: 107,
  cancelAllPartial: 108,
  // 2xx: validation rejects, in the order the checks run.
  badEnvelope: 200,
  unknownCommandType: 201,
  badDecimal: 202,
  precisionExceeded: 203,
  nonPositive: 204,
  magnitudeExceeded: 205,
  partitionMismatch: 206,
  pairMismatch: 207,
  badPrecision: 208,
  unsupportedCombination: 209,
  pairPrecisionMismatch: 210,
  volumeExceedsTotal: 211,
  badTimeout: 212,
  // 3xx: business rejects.
  postOnlyWouldTake: 300,
  unknownOrder: 301,
  orderAlreadyFinished: 302,
  notOwner: 303,
  pairHalted: 304,
  amendBelowExecuted: 305,
  pairAlreadyHalted: 306,
  pairNotHalted: 307,
  notAuthorised: 308,
  expiryInPast: 309,
  expiryTooFar: 310,
  // 4xx: duplicates.
  duplicateOrder: 400,
  duplicateCommand: 401,
} as const;

export type ResultCodeName = keyof typeof ResultCodes;
export type ResultCode = (typeof ResultCodes)[ResultCodeName];

/** Wire names (kebab-case) that go into results and events next to the number. */
const wireNames: Record<ResultCodeName, string> = {
  ok: "ok",
  rested: "rested",
  partiallyFilledRested: "partially-filled-rested",
  filled: "filled",
  remainderCancelled: "remainder-cancelled",
  fokNotFilled: "fok-not-filled",
  stpCancelled: "stp-cancelled",
  stopAccepted: "stop-accepted",
  amendUnchanged: "amend-unchanged",
  cancelAllPartial: "cancel-all-partial",
  badEnvelope: "bad-envelope",
  unknownCommandType: "unknown-command-type",
  badDecimal: "bad-decimal",
  precisionExceeded: "precision-exceeded",
  nonPositive: "non-positive",
  magnitudeExceeded: "magnitude-exceeded",
  partitionMismatch: "partition-mismatch",
  pairMismatch: "pair-mismatch",
  badPrecision: "bad-precision",
  unsupportedCombination: "unsupported-combination",
  pairPrecisionMismatch: "pair-precision-mismatch",
  volumeExceedsTotal: "volume-exceeds-total",
  badTimeout: "bad-timeout",
  postOnlyWouldTake: "post-only-would-take",
  unknownOrder: "unknown-order",
  orderAlreadyFinished: "order-already-finished",
  notOwner: "not-owner",
  pairHalted: "pair-halted",
  amendBelowExecuted: "amend-below-executed",
  pairAlreadyHalted: "pair-already-halted",
  pairNotHalted: "pair-not-halted",
  notAuthorised: "not-authorised",
  expiryInPast: "expiry-in-past",
  expiryTooFar: "expiry-too-far",
  duplicateOrder: "duplicate-order",
  duplicateCommand: "duplicate-command",
};

const namesByCode = new Map<number, string>(
  (Object.keys(ResultCodes) as ResultCodeName[]).map((key) => [ResultCodes[key], wireNames[key]]),
);

/** The same names in an array indexed by code: every accepted command looks one up. */
const namesByIndex: (string | undefined)[] = new Array<string | undefined>(
  Math.max(...namesByCode.keys()) + 1,
).fill(undefined);
for (const [code, name] of namesByCode) namesByIndex[code] = name;

/** The wire name of a code, or "unknown" for a number outside the table. */
export function resultCodeName(code: number): string {
  return (Number.isInteger(code) && code >= 0 ? namesByIndex[code] : undefined) ?? "unknown";
}

/** Every code with its wire name, for docs, metrics labels and tests. */
export function listResultCodes(): { code: number; name: string }[] {
  return [...namesByCode].map(([code, name]) => ({ code, name }));
}

export type ResultKind = "ok" | "accepted" | "validation" | "business" | "duplicate" | "unknown";

/** The group a code belongs to, from its hundreds digit. */
export function resultKind(code: number): ResultKind {
  if (code === 0) return "ok";
  const group = Math.floor(code / 100);
  if (group === 1) return "accepted";
  if (group === 2) return "validation";
  if (group === 3) return "business";
  if (group === 4) return "duplicate";
  return "unknown";
}
