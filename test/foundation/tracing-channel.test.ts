/**
 * ioredis traces a command unless its tracing channel says nobody listens: the channel must
 * say so while nobody does, and say otherwise once someone subscribes.
 */
import { expect, test } from "bun:test";
import dc from "node:diagnostics_channel";
import "../../src/infra/valkey/client";
import { defineTracingHasSubscribers } from "../../src/infra/valkey/tracing-channel";

test("a tracing channel reports its subscribers, as Node's does", () => {
  expect(defineTracingHasSubscribers()).toBe(false);
  const channel = dc.tracingChannel("matchd:test");
  expect(channel.hasSubscribers).toBe(false);
  const handlers = { asyncEnd: () => undefined };
  channel.subscribe(handlers);
  expect(channel.hasSubscribers).toBe(true);
  channel.unsubscribe(handlers);
  expect(channel.hasSubscribers).toBe(false);
});
