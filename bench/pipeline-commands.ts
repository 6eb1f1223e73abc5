/**
 * A pipeline run's commands, made and encoded before anything is sent, with the pure engine's
 * verdict on them: the domain applies the same commands in the same order (the queue has one
 * active consumer, so that is the order the conductor applies them), so what it refuses and
 * the events it emits in the timed window are exactly what the conductor must show.
 */
import { type CommandEnvelope, MatchingEngine } from "../src/domain/index";
import type { PipelineOptions } from "./pipeline-bench";
import { isDated, type PipelineClock, pipelineClock } from "./pipeline-clock";
import { createWorkload, type Workload } from "./workloads";

export interface PipelineCommands {
  workload: Workload;
  prefillCount: number;
  /** The first timed command's index: prefill and warm-up come before it. */
  timedFrom: number;
  bodies: Buffer[];
  commandIds: string[];
  /**
   * Commands that emit no event (an unchanged amend, a cancel-all that finds nothing): no
   * event completes them, so the first event of a later command does.
   */
  silent: number[];
  /** The timed commands by kind ("limit bid", "cancel", ...). */
  mix: Map<string, number>;
  /**
   * On the wall clock: what the conductor does depends on when each batch runs, so nothing
   * is predicted (reference, silent and the counts stay empty) and the run is replayed
   * afterwards with the times the conductor recorded (pipeline-replay.ts).
   */
  clock?: PipelineClock;
  /** The engine after every command: its digest is what the conductor's books must hash to. */
  reference: MatchingEngine;
  referenceRejected: number;
  referenceEventsTimed: number;
}

/**
 * Makes every command. Exact for every workload: mixed refuses some commands by design, and
 * multi-pair's pairs left resting at the window's edges shift its event count away from 2 a
 * command. Applied as they are made rather than replayed at the end: a long run (a soak) then
 * holds only each command's bytes, not its parsed envelope as well (2 KB a command and GC).
 */
export function preparePipelineCommands(options: PipelineOptions): PipelineCommands {
  const { config } = options;
  const clock =
    options.wallClock === true && options.rate !== undefined
      ? pipelineClock(options.rate, Date.now())
      : undefined;
  const workload = createWorkload(options.workload, {
    seed: options.seed,
    partition: config.partition,
    partitionCount: config.partitionCount,
    ...(clock === undefined ? {} : { clock }),
  });
  const prefill = workload.prefill();
  const total = options.warmup + options.commands;
  const made: PipelineCommands = {
    workload,
    prefillCount: prefill.length,
    timedFrom: prefill.length + options.warmup,
    bodies: [],
    commandIds: [],
    silent: [],
    mix: new Map(),
    ...(clock === undefined ? {} : { clock }),
    reference: new MatchingEngine(),
    referenceRejected: 0,
    referenceEventsTimed: 0,
  };
  for (const command of prefill) encode(made, command);
  for (let i = 0; i < total; i++) {
    const command = workload.next(i);
    if (i >= options.warmup) {
      const kind = commandKind(command);
      made.mix.set(kind, (made.mix.get(kind) ?? 0) + 1);
    }
    encode(made, command);
  }
  return made;
}

function encode(made: PipelineCommands, command: CommandEnvelope): void {
  if (made.clock !== undefined) {
    if (isDated(command)) made.clock.dated.add(made.bodies.length);
    made.commandIds.push(command.commandId);
    made.bodies.push(Buffer.from(JSON.stringify(command)));
    return;
  }
  const outcome = made.reference.apply(command);
  if (outcome.events.length === 0) made.silent.push(made.bodies.length);
  if (outcome.result.status === "rejected") made.referenceRejected++;
  if (made.bodies.length >= made.timedFrom) made.referenceEventsTimed += outcome.events.length;
  made.commandIds.push(command.commandId);
  made.bodies.push(Buffer.from(JSON.stringify(command)));
}

function commandKind(command: CommandEnvelope): string {
  if (command.type !== "order.place") return command.type.replace(/^order\./, "");
  const p = command.payload;
  const flags = [
    p.postOnly ? "post-only" : "",
    p.timeInForce && p.timeInForce !== "gtc" ? p.timeInForce : "",
  ];
  return [p.type, p.side, ...flags].filter(Boolean).join(" ");
}
