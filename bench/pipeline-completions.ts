/**
 * When each command of a pipeline run completed: its durable reply (conductor, round trip),
 * or the last of its events at a sink (full pipeline). Events arrive in stream order, and the
 * stream holds commands in queue order, so a later command's event also completes every
 * earlier command that emits none: known beforehand, or (on the wall clock) any command with
 * no event received by then. On the wall clock the sink also keeps every event id in the
 * order received, the conductor's clock ticks' too, for the replay (pipeline-replay.ts).
 */
import { SeenEvents } from "./event-dedup";
import { LatencyHistogram } from "./histogram";
import type { LeanDelivery } from "./lean-consumer";
import type { PipelineCommands } from "./pipeline-commands";
import { SeriesRecorder } from "./series-recorder";

export class PipelineCompletions {
  readonly sentAt: Float64Array;
  readonly repliedAt: Float64Array;
  readonly expectedEvents: Int32Array;
  readonly receivedEvents: Int32Array;
  readonly lastEventAt: Float64Array;
  /** Deal events per command. */
  readonly fills: Int32Array;
  /** Latency of the timed commands, ns. */
  readonly latency = new LatencyHistogram();
  /** Per-second throughput and latency of the timed commands, by completion time. */
  readonly recorder = new SeriesRecorder({ intervalMs: 1000 });
  completed = 0;
  completedTimed = 0;
  failedReplies = 0;
  eventsReceived = 0;
  duplicateEvents = 0;
  /** Called once, when half the timed commands completed. */
  onHalfway: (() => void) | undefined;
  private readonly indexOf = new Map<string, number>();
  /** A command completes once: more events than its count says must not time it again. */
  private readonly completedOnce: Uint8Array;
  private readonly seen: SeenEvents;
  private readonly halfway: number;
  private silentHead = 0;
  /** On the wall clock: which commands emit no event is seen, not predicted. */
  private readonly quiet: boolean;
  private quietHead = 0;
  /** On the wall clock: every first copy of an event id, in the order received. */
  readonly eventIds: string[] = [];
  /** On the wall clock: the times of the conductor's ticks that emitted events. */
  readonly tickTimes = new Set<number>();
  tickEvents = 0;
  private readonly tickPrefix: string | undefined;
  private readonly ticksSeen = new Set<string>();
  /** Commands published so far, and the silent ones among them (published in index order). */
  private published = 0;
  private silentPublished = 0;

  constructor(
    private readonly commands: PipelineCommands,
    private readonly useReplies: boolean,
    timedCommands: number,
    partition: number,
  ) {
    this.quiet = commands.clock !== undefined && !useReplies;
    this.tickPrefix = commands.clock === undefined ? undefined : `clock.tick:${partition}:`;
    const n = commands.bodies.length;
    this.sentAt = new Float64Array(n);
    this.repliedAt = new Float64Array(n);
    this.expectedEvents = new Int32Array(n).fill(-1);
    this.receivedEvents = new Int32Array(n);
    this.lastEventAt = new Float64Array(n);
    this.fills = new Int32Array(n);
    this.completedOnce = new Uint8Array(n);
    this.seen = new SeenEvents(n);
    this.halfway = Math.max(1, Math.floor(timedCommands / 2));
    commands.commandIds.forEach((commandId, i) => {
      this.indexOf.set(commandId, i);
    });
  }

  commandIdOf(i: number): string {
    return this.commands.commandIds[i]!;
  }

  index(commandId: string): number | undefined {
    return this.indexOf.get(commandId);
  }

  /** Command `i` goes out, counted as sent at `at` (its scheduled time in open loop). */
  sent(i: number, at: number): void {
    this.sentAt[i] = at;
    this.published = Math.max(this.published, i + 1);
    const { silent } = this.commands;
    while (this.silentPublished < silent.length && silent[this.silentPublished]! < this.published)
      this.silentPublished++;
  }

  isComplete(i: number): boolean {
    return this.useReplies
      ? this.repliedAt[i]! > 0
      : this.expectedEvents[i]! >= 0 && this.receivedEvents[i]! >= this.expectedEvents[i]!;
  }

  /** When command `i` completed (its reply, or its last event). */
  endOf(i: number): number {
    return this.useReplies ? this.repliedAt[i]! : this.lastEventAt[i]!;
  }

  /**
   * The timed commands' latencies split by whether a command was in flight (from its send to
   * its completion) while one of `windows` ran: [from, to] in performance.now() milliseconds.
   */
  latencyAround(windows: readonly { from: number; to: number }[]): {
    during: LatencyHistogram;
    outside: LatencyHistogram;
  } {
    const during = new LatencyHistogram();
    const outside = new LatencyHistogram();
    for (let i = this.commands.timedFrom; i < this.completedOnce.length; i++) {
      if (this.completedOnce[i] !== 1) continue;
      const sent = this.sentAt[i]!;
      const end = this.endOf(i);
      const overlaps = windows.some((w) => sent <= w.to && end >= w.from);
      (overlaps ? during : outside).record((end - sent) * 1e6);
    }
    return { during, outside };
  }

  /** A durable RPC reply. */
  replied = (message: LeanDelivery): void => {
    const i = this.indexOf.get(message.correlationId ?? "");
    if (i === undefined || this.repliedAt[i]! > 0) return;
    this.repliedAt[i] = performance.now();
    const result = JSON.parse(message.body.toString()) as { status: string; events: number };
    if (result.status === "rejected") this.failedReplies++;
    this.expectedEvents[i] = result.events;
    if (this.isComplete(i)) this.complete(i);
  };

  /** An event at the sink; `eventsOf` reads how many events its command emitted. */
  event = (message: LeanDelivery, eventsOf: (body: Buffer) => number): void => {
    // Event ids are `<commandId>:<ordinal>:<type>`; every event carries one.
    const eventId = message.messageId;
    if (eventId === undefined) return;
    const colon = eventId.indexOf(":");
    const i = this.indexOf.get(eventId.slice(0, colon));
    // Events of other runs (a shared broker) are neither received, nor duplicates, nor
    // rejections here.
    if (i === undefined) {
      this.tickEvent(eventId);
      return;
    }
    if (!this.seen.isNew(eventId, i, colon)) {
      this.duplicateEvents++;
      return;
    }
    if (this.tickPrefix !== undefined) this.eventIds.push(eventId);
    this.eventsReceived++;
    if (eventId.endsWith(":order.rejected.v1")) this.failedReplies++;
    if (eventId.endsWith(":deal.executed.v1")) this.fills[i]!++;
    this.receivedEvents[i]!++;
    if (this.expectedEvents[i]! < 0) this.expectedEvents[i] = eventsOf(message.body);
    const now = performance.now();
    if (now > this.lastEventAt[i]!) this.lastEventAt[i] = now;
    if (this.quiet) this.completeQuiet(i, now);
    this.completeSilent(i, now);
    if (this.isComplete(i)) this.complete(i);
    // The last commands published (of the warm-up, or of the run) may be silent ones: once
    // the rest of what was published completed, no event of theirs can follow.
    if (this.onlySilentLeft()) this.completeSilent(this.published, now);
  };

  /**
   * The id of the last silent command published, when only silent ones are left of what was
   * published: no event will complete them, and its stored result says they all were.
   */
  silentLeft(): string | undefined {
    if (this.silentHead === this.silentPublished || !this.onlySilentLeft()) return undefined;
    return this.commands.commandIds[this.commands.silent[this.silentPublished - 1]!]!;
  }

  /** Completes every silent command published (their last one's result is stored). */
  settleSilent(now: number): void {
    this.completeSilent(this.published, now);
  }

  /**
   * On the wall clock, the first command published and not completed when no event of it came
   * yet: silent if its stored result says it emitted none (settleQuiet), else still under way.
   */
  quietLeft(): number | undefined {
    if (!this.quiet) return undefined;
    while (this.quietHead < this.published && this.completedOnce[this.quietHead] === 1)
      this.quietHead++;
    const i = this.quietHead;
    return i < this.published && this.receivedEvents[i] === 0 ? i : undefined;
  }

  /** Command `i` (from quietLeft) emitted no event: it completed. */
  settleQuiet(i: number, now: number): void {
    this.completeQuiet(i + 1, now);
  }

  /** A clock tick's event (ids `clock.tick:<partition>:<ms>:...`), on the wall clock only. */
  private tickEvent(eventId: string): void {
    const prefix = this.tickPrefix;
    if (prefix === undefined || !eventId.startsWith(prefix) || this.ticksSeen.has(eventId)) return;
    this.ticksSeen.add(eventId);
    this.eventIds.push(eventId);
    this.tickEvents++;
    this.tickTimes.add(Number(eventId.slice(prefix.length, eventId.indexOf(":", prefix.length))));
  }

  /** Every command before `before` with no event received emitted none. */
  private completeQuiet(before: number, now: number): void {
    while (this.quietHead < before) {
      const i = this.quietHead++;
      if (this.receivedEvents[i] !== 0 || this.completedOnce[i] === 1) continue;
      this.expectedEvents[i] = 0;
      this.lastEventAt[i] = now;
      this.complete(i);
    }
  }

  private onlySilentLeft(): boolean {
    return this.completed + this.silentPublished - this.silentHead === this.published;
  }

  private completeSilent(before: number, now: number): void {
    const { silent } = this.commands;
    while (this.silentHead < silent.length && silent[this.silentHead]! < before) {
      const i = silent[this.silentHead++]!;
      this.expectedEvents[i] = 0;
      this.lastEventAt[i] = now;
      this.complete(i);
    }
  }

  private complete(i: number): void {
    if (this.completedOnce[i] === 1) return;
    this.completedOnce[i] = 1;
    const end = this.endOf(i);
    this.completed++;
    if (i < this.commands.timedFrom) return;
    this.completedTimed++;
    if (this.completedTimed === this.halfway) this.onHalfway?.();
    const ns = (end - this.sentAt[i]!) * 1e6;
    this.latency.record(ns);
    this.recorder.record(ns, end * 1e6);
  }
}
