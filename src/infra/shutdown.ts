/**
 * The reason a service stops: the first SIGTERM or SIGINT, or a reason the service gives
 * itself. Later signals are logged and ignored rather than left to their default action,
 * which would end the process in the middle of its stop (a conductor with batches committed
 * and unacknowledged, an outbox before it releases its lease).
 */
import type { Logger } from "./log";

export interface Shutdown {
  /** Resolves with the first reason: "SIGTERM", "SIGINT" or one passed to `stop`. */
  readonly reason: Promise<string>;
  /** Stops for a reason of the service's own; signals after it are ignored too. */
  stop(reason: string): void;
}

export function watchShutdown(log: Logger): Shutdown {
  let decided: string | undefined;
  let resolve: (reason: string) => void = () => {};
  const reason = new Promise<string>((done) => {
    resolve = done;
  });
  const decide = (name: string) => {
    if (decided !== undefined) return false;
    decided = name;
    resolve(name);
    return true;
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (!decide(signal)) log.warn("already shutting down; signal ignored", { signal });
    });
  }
  return { reason, stop: (why) => void decide(why) };
}
