/** The result-code table: unique numbers and names, each number in the group of its kind. */
import { expect, test } from "bun:test";
import { listResultCodes, ResultCodes, resultKind } from "../../src/domain/index";

test("codes and wire names are unique, and each code sits in its kind's hundred", () => {
  const codes = listResultCodes();
  expect(codes).toHaveLength(Object.keys(ResultCodes).length);
  expect(new Set(codes.map((c) => c.code)).size).toBe(codes.length);
  expect(new Set(codes.map((c) => c.name)).size).toBe(codes.length);
  expect(resultKind(ResultCodes.ok)).toBe("ok");
  expect(resultKind(ResultCodes.rested)).toBe("accepted");
  expect(resultKind(ResultCodes.precisionExceeded)).toBe("validation");
  expect(resultKind(ResultCodes.postOnlyWouldTake)).toBe("business");
  expect(resultKind(ResultCodes.duplicateOrder)).toBe("duplicate");
  for (const { code } of codes) expect(resultKind(code)).not.toBe("unknown");
});

test("the numbers are stable: consumers store them, so a code is never renumbered or reused", () => {
  // Extend at the end of a kind's hundred; never edit a line here.
  expect(listResultCodes().map(({ code, name }) => [code, name])).toEqual([
    [0, "ok"],
    [100, "rested"],
    [101, "partially-filled-rested"],
    [102, "filled"],
    [103, "remainder-cancelled"],
    [104, "fok-not-filled"],
    [105, "stp-cancelled"],
    [106, "stop-accepted"],
    [107, "amend-unchanged"],
    [108, "cancel-all-partial"],
    [200, "bad-envelope"],
    [201, "unknown-command-type"],
    [202, "bad-decimal"],
    [203, "precision-exceeded"],
    [204, "non-positive"],
    [205, "magnitude-exceeded"],
    [206, "partition-mismatch"],
    [207, "pair-mismatch"],
    [208, "bad-precision"],
    [209, "unsupported-combination"],
    [210, "pair-precision-mismatch"],
    [211, "volume-exceeds-total"],
    [212, "bad-timeout"],
    [300, "post-only-would-take"],
    [301, "unknown-order"],
    [302, "order-already-finished"],
    [303, "not-owner"],
    [304, "pair-halted"],
    [305, "amend-below-executed"],
    [306, "pair-already-halted"],
    [307, "pair-not-halted"],
    [308, "not-authorised"],
    [309, "expiry-in-past"],
    [310, "expiry-too-far"],
    [400, "duplicate-order"],
    [401, "duplicate-command"],
  ]);
});
