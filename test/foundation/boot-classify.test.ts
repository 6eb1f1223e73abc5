// Which failed boot checks wait (the datastore cannot be reached now) and which refuse at once
// (it cannot honour the policy): the verdicts behind awaitDurabilityPolicy's boot wait.

import { expect, test } from "bun:test";
import { cannotReachNow } from "../../src/infra/boot";
import type { CheckOutcome } from "../../src/infra/valkey/durability";

const failed = (name: string, detail: string, retryable?: boolean): CheckOutcome => ({
  name,
  ok: false,
  detail,
  ...(retryable === undefined ? {} : { retryable }),
});

test("a connection that cannot be made or kept now waits; a setting refuses at once", () => {
  const probe = "probe write fsynced on primary and replica";
  for (const sentinels of [false, true]) {
    expect(cannotReachNow(failed(probe, "probe failed: Connection is closed."), sentinels)).toBe(
      true,
    );
    expect(
      cannotReachNow(failed("appendonly on", "could not be checked: LOADING"), sentinels),
    ).toBe(true);
    expect(cannotReachNow(failed("datastore reachable", "ECONNREFUSED", true), sentinels)).toBe(
      true,
    );
    // The server answered with an error: a wrong password does not mend by waiting.
    expect(cannotReachNow(failed("datastore reachable", "WRONGPASS", false), sentinels)).toBe(
      false,
    );
    expect(cannotReachNow(failed("appendonly on", "appendonly is off; set ..."), sentinels)).toBe(
      false,
    );
    expect(
      cannotReachNow(
        failed("appendfsync always on the primary", "appendfsync is everysec"),
        sentinels,
      ),
    ).toBe(false);
    expect(cannotReachNow({ name: probe, ok: true, detail: "" }, sentinels)).toBe(false);
  }
});

test("behind Sentinels a failover under way waits; the same without them is a setting", () => {
  const replica = failed("primary role", "server is a replica, not a primary");
  const alone = failed("replica connected", "no replica is connected");
  const probe = failed("probe write fsynced on primary and replica", "durability not confirmed");
  for (const outcome of [replica, alone, probe]) {
    expect(cannotReachNow(outcome, true)).toBe(true);
    expect(cannotReachNow(outcome, false)).toBe(false);
  }
  // The Sentinels knowing no replica at all is a setting either way.
  const none = failed("sentinels see a replica", "the Sentinels know no replica of matchd");
  expect(cannotReachNow(none, true)).toBe(false);
});
