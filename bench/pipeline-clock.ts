/**
 * A pipeline run on the wall clock (`--clock wall`): the exchange workload's good-till-date
 * orders, one-cancels-other brackets and dead-man's switches, timed against the conductor's
 * own clock. Commands are made before the run on a virtual clock, one command every
 * 1000 / rate ms; each dated body is moved to the wall clock as it goes out, so an order's
 * lifetime counts from its send, whenever the run starts.
 */
import type { CommandEnvelope } from "../src/domain/index";
import type { WorkloadClock } from "./workload-parts";

export interface PipelineClock extends WorkloadClock {
  /** Bodies that name an expiry (by index): only they are rewritten at the send. */
  dated: Set<number>;
  /** Added to every expiry sent from now on: the wall clock's lead on the virtual one. */
  shiftMs: number;
}

/** The virtual clock of a run offered `rate` commands a second, made at `epochMs`. */
export function pipelineClock(rate: number, epochMs: number): PipelineClock {
  return { epochMs, msPerCommand: 1000 / rate, dated: new Set(), shiftMs: 0 };
}

/** Whether a command names an expiry the send must move. */
export function isDated(command: CommandEnvelope): boolean {
  if (command.type === "order.place") return command.payload.expireAt !== undefined;
  if (command.type === "order.place-oco") {
    return command.payload.legs.some((leg) => leg.expireAt !== undefined);
  }
  return false;
}

/**
 * From the next send on, the workload command `index` (prefill not counted) goes out at the
 * wall clock's `wallMs`: its expiries and the later ones are moved by the same lead.
 */
export function alignClock(clock: PipelineClock, index: number, wallMs: number): void {
  clock.shiftMs = Math.round(wallMs - (clock.epochMs + index * clock.msPerCommand));
}

/** The body as sent: its expiries moved by the clock's shift. */
export function bodyAtSend(clock: PipelineClock, body: Buffer): Buffer {
  const command = JSON.parse(body.toString()) as CommandEnvelope;
  const shift = (expireAt: number | undefined) =>
    expireAt === undefined ? undefined : expireAt + clock.shiftMs;
  if (command.type === "order.place") {
    command.payload.expireAt = shift(command.payload.expireAt);
  } else if (command.type === "order.place-oco") {
    for (const leg of command.payload.legs) leg.expireAt = shift(leg.expireAt);
  }
  return Buffer.from(JSON.stringify(command));
}
