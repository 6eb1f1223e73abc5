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
