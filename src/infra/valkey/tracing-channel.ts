/**
 * Gives Bun's `TracingChannel` the `hasSubscribers` getter Node's has. ioredis (5.11) asks it
 * before every command and traces unless it is `false`; Bun 1.4 leaves it undefined, so every
 * command was traced with nobody listening: its arguments turned into strings for a trace
 * context, and its reply wrapped in extra promises.
 */
import dc from "node:diagnostics_channel";

const events = ["start", "end", "asyncStart", "asyncEnd", "error"] as const;

type Events = Record<(typeof events)[number], { hasSubscribers: boolean } | undefined>;

/** Defines the getter when the runtime lacks it; true when it did. */
export function defineTracingHasSubscribers(): boolean {
  const prototype: object = Object.getPrototypeOf(dc.tracingChannel("matchd:probe"));
  if ("hasSubscribers" in prototype) return false;
  Object.defineProperty(prototype, "hasSubscribers", {
    configurable: true,
    get(this: Events): boolean {
      return events.some((event) => this[event]?.hasSubscribers === true);
    },
  });
  return true;
}

defineTracingHasSubscribers();
