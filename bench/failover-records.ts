/**
 * What a failover run saw of each command it sent, by the command's index: when it was
 * scheduled, replied and first seen as an event, its reply, and the events as a consumer
 * restoring the stream order receives them (copies, phantoms, commit offsets).
 */
import type { CommandEnvelope } from "../src/domain/index";
import type { ClusterMessage } from "./cluster-client";
import { StreamOrderCheck, streamOffset } from "./stream-order";

export class CommandRecords {
  readonly sent: CommandEnvelope[] = [];
  private readonly indexOf = new Map<string, number>();
  /** Scheduled send time of each command, ms from the run's start. */
  readonly scheduledMs: number[] = [];
  /** Reply time of each command (0: none). */
  readonly repliedMs: number[] = [];
  /** Time of each command's first event, in the restored order (0: none). */
  readonly firstEventMs: number[] = [];
  /** Time of each command's first event to arrive, before the order is restored. */
  readonly firstArrivalMs: number[] = [];
  /** Each command's first event's stream offset, as one comparable number. */
  readonly committedAt: (bigint | undefined)[] = [];
  readonly replyBodies: (string | undefined)[] = [];
  /** Payload hash of every distinct event id seen. */
  readonly eventHashes = new Map<string, bigint>();
  eventCopies = 0;
  phantomEvents = 0;
  unexpectedEvents = 0;
  readonly order = new StreamOrderCheck();

  /** `now`: ms from the run's start. */
  constructor(private readonly now: () => number) {}

  /** A command sent, counted as sent at `atMs` (its scheduled time). */
  add(command: CommandEnvelope, atMs: number): void {
    this.indexOf.set(command.commandId, this.sent.length);
    this.sent.push(command);
    this.scheduledMs.push(atMs);
    this.repliedMs.push(0);
    this.firstEventMs.push(0);
    this.firstArrivalMs.push(0);
    this.committedAt.push(undefined);
    this.replyBodies.push(undefined);
  }

  /** The first reply to a command counts; a copy of it does not. */
  replied(correlationId: string, body: string): void {
    const i = this.indexOf.get(correlationId);
    if (i === undefined || this.repliedMs[i]! > 0) return;
    this.repliedMs[i] = this.now();
    this.replyBodies[i] = body;
  }

  /** An event as it arrived, before the order is restored. */
  arrived(eventId: string): void {
    const i = this.commandOf(eventId);
    if (i !== undefined && this.firstArrivalMs[i] === 0) this.firstArrivalMs[i] = this.now();
  }

  /** An event in the restored order; `copy` when the resequencer already delivered its id. */
  delivered = (message: ClusterMessage, copy: boolean): void => {
    const eventId = message.messageId ?? "";
    const i = this.commandOf(eventId);
    if (i === undefined) {
      this.unexpectedEvents++;
      return;
    }
    const hash = BigInt(Bun.hash(message.body));
    const before = this.eventHashes.get(eventId);
    this.order.record(message.offset, copy || before !== undefined);
    if (before === undefined) this.eventHashes.set(eventId, hash);
    else {
      this.eventCopies++;
      if (before !== hash) this.phantomEvents++;
    }
    if (this.firstEventMs[i] === 0) this.firstEventMs[i] = this.now();
    const offset = streamOffset(message.offset);
    const first = this.committedAt[i];
    if (offset !== undefined && (first === undefined || offset < first))
      this.committedAt[i] = offset;
  };

  /** Every command replied and seen as an event. */
  complete(): boolean {
    return this.repliedMs.every((t) => t > 0) && this.firstEventMs.every((t) => t > 0);
  }

  /** The command an event id belongs to (`<commandId>:<n>`). */
  private commandOf(eventId: string): number | undefined {
    return this.indexOf.get(eventId.slice(0, eventId.indexOf(":")));
  }
}
