/**
 * ioredis traces a command unless its tracing channel says nobody listens: the channel must
 * say so while nobody does, and say otherwise once someone subscribes.
 */
import { expect, test } from "bun:test";
import dc from "node:diagnostics_channel";
// ioredis's own tracing wrapper, which its every command goes through.
import { traceCommand } from "ioredis/built/tracing";
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

test("with nobody listening, ioredis runs a command untraced: its own promise comes back", () => {
  const reply = Promise.resolve("OK");
  const context = () => ({
    command: "GET",
    args: ["k"],
    database: 0,
    serverAddress: "127.0.0.1",
    serverPort: 6379,
  });
  expect(traceCommand(() => reply, context)).toBe(reply);
});
