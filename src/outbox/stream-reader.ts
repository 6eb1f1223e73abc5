/**
 * The outbox's view of the partition's events stream and its consumer group: create
 * the group, read this consumer's own pending entries, claim a dead consumer's, read
 * new ones, and advance the stream (XACK + XDEL + HDEL in one atomic script). Reads and
 * writes use separate connections so a blocking read never delays an acknowledgement.
 */
import { connectionGeneration, replyCode, type Valkey } from "../infra/valkey/client";
import {
  ConnectionChangedError,
  type DurabilityRule,
  markerWriteScript,
  waitDurable,
} from "../infra/valkey/durability";
import type { PartitionKeys } from "../infra/valkey/keys";
import { runEncodedScript, runScript } from "../infra/valkey/lua-script";
import { entryTimeMs, type StreamEntry } from "./envelope";
import {
  acknowledgeScript,
  createGroupScript,
  DEAD_LETTER_MAX_VALUES,
  deadLetterScript,
  forgetIdleConsumersScript,
  recordAttemptsScript,
} from "./scripts";

/** The barrier key outlives an idle outbox's reads (one per block period) by far. */
const READ_BARRIER_TTL_MS = 60_000;

/** True for errors that mean the stream or its group vanished under us. */
export function isMissingGroup(error: unknown): boolean {
  const code = replyCode(error);
  return code === "NOGROUP" || code === "UNBLOCKED";
}

export interface StreamStats {
  pending: number;
  length: number;
  /** Milliseconds-since-epoch part of the oldest entry still in the stream, or null when empty. */
  oldestEntryMs: number | null;
}

/** New entries, whose durability wait is the caller's to run (see readNewOn). */
export interface NewEntries {
  entries: StreamEntry[];
  /** Entries pending for other consumers right after the read. */
  othersPending: number;
  /** Resolves once the entries are durable (at once under the memory policy, or for none). */
  durable: () => Promise<void>;
}

/** Which of the two readers a read of new entries goes out on. */
export type ReaderSide = 0 | 1;

export interface AckItem {
  entryId: string;
  eventId: string;
}

/** Under aof-replicated: how long a read waits for its entries' fsync, and where the wait is told. */
export interface ReadDurability extends DurabilityRule {
  timeoutMs: number;
  observeWaitMs: (waitedMs: number) => void;
}

export class OutboxStream {
  /**
   * Whether attempt counters may exist: true at each session start until an acknowledgement
   * finds the hash empty, and again after every retry records attempts. While false,
   * acknowledging skips the HDEL of every event id, the larger part of its arguments.
   */
  private attemptsMayExist = true;
  /** Bumped by every recordAttempts, so an acknowledgement racing one cannot clear the flag. */
  private attemptsRecorded = 0;

  constructor(
    private readonly reader: Valkey,
    private readonly writer: Valkey,
    private readonly keys: PartitionKeys,
    readonly group: string,
    readonly consumer: string,
    /** Null under the memory policy: entries are published as soon as they are read. */
    private readonly durability: ReadDurability | null = null,
    /**
     * Reads new entries in turn with `reader` (see readNewOn): a WAITAOF blocks its
     * connection, and the next read, queued behind the last one's wait, would wait for it.
     */
    private readonly secondReader: Valkey = reader,
  ) {}

  /**
   * Creates the group at id 0 (so a backlog written before the group existed is
   * delivered) and the stream with it; an existing group is fine.
   */
  async ensureGroup(): Promise<boolean> {
    // A new session: an earlier lease holder may have left attempt counters behind.
    this.attemptsMayExist = true;
    const created = await runScript(
      this.writer,
      createGroupScript,
      [this.keys.events],
      [this.group],
    );
    return Number(created) === 1;
  }

  /**
   * This consumer's pending entries after `afterId`, oldest first. Entries deleted
   * while pending come back without fields; they are returned in `vanished` so the
   * caller can acknowledge them.
   */
  async readOwnPending(
    afterId: string,
    count: number,
    abandon: () => boolean = () => false,
  ): Promise<{ entries: StreamEntry[]; vanished: string[]; lastId: string | null }> {
    const generation = connectionGeneration(this.reader);
    const reply = await this.reader.call(
      "XREADGROUP",
      "GROUP",
      this.group,
      this.consumer,
      "COUNT",
      count,
      "STREAMS",
      this.keys.events,
      afterId,
    );
    const raw = firstStreamEntries(reply);
    const entries: StreamEntry[] = [];
    const vanished: string[] = [];
    let lastId: string | null = null;
    for (const item of raw) {
      const [id, fields] = item as [string, string[] | null];
      lastId = id;
      if (fields === null) vanished.push(id);
      else entries.push({ id, fields });
    }
    if (entries.length > 0) await this.durableThroughRead(this.reader, generation, true, abandon);
    return { entries, vanished, lastId };
  }

  /**
   * Moves every entry pending for another consumer longer than `minIdleMs` into this
   * consumer's pending list without reading it (JUSTID); deleted entries drop out of the group.
   * Delivery then reads this consumer's pending list from the start, so claimed entries and
   * entries it held already go out together in stream order. Returns how many were claimed.
   */
  async claimIdle(minIdleMs: number, count: number): Promise<number> {
    let cursor = "0-0";
    let claimed = 0;
    do {
      const reply = (await this.reader.call(
        "XAUTOCLAIM",
        this.keys.events,
        this.group,
        this.consumer,
        minIdleMs,
        cursor,
        "COUNT",
        count,
        "JUSTID",
      )) as [string, string[]];
      cursor = reply[0];
      claimed += reply[1]?.length ?? 0;
    } while (cursor !== "0-0");
    return claimed;
  }

  /**
   * New entries (`>`) on reader `side`, waiting up to `blockMs` when there are none (0 = do
   * not wait), with how many entries other consumers had pending right after the read, taken
   * in the same round trip, so a backlog costs no extra one. The durability wait is left to
   * the caller (`durable`): the next read can go out on the other reader while this one's
   * entries wait for their fsync, so entries committed meanwhile are read at once, and their
   * read barrier shares their commit's fsync. Only one read at a time: the next is sent once
   * this one has answered, so reads stay in stream order.
   */
  async readNewOn(
    side: ReaderSide,
    count: number,
    blockMs: number,
    abandon: () => boolean = () => false,
  ): Promise<NewEntries> {
    const reader = side === 0 ? this.reader : this.secondReader;
    const read: (string | number)[] = ["GROUP", this.group, this.consumer, "COUNT", count];
    if (blockMs > 0) read.push("BLOCK", blockMs);
    read.push("STREAMS", this.keys.events, ">");
    const generation = connectionGeneration(reader);
    // One round trip, in this order on one connection: the barrier goes out right behind the
    // read (behind a blocking read the server runs it as soon as the read is served, in the
    // same pass, so it costs no round trip or fsync of its own; when the read times out
    // empty, it is one small write per block period), and the pending count right behind
    // that. Pipelined rather than in a MULTI (as the read that does not wait once was): the
    // same single round trip, and one code path for both kinds of read.
    const [reply, , pendingReply] = await Promise.all([
      reader.call("XREADGROUP", ...read),
      this.durability !== null ? reader.call("EVAL", ...this.barrierCommand()) : undefined,
      reader.call("XPENDING", this.keys.events, this.group),
    ]);
    // A read that was resent on a new connection may have had a first attempt that moved
    // entries into this consumer's pending list with its reply lost: what this reply holds
    // comes after them, so it is not delivered; the next session re-reads the pending list.
    if (connectionGeneration(reader) !== generation) {
      throw new ConnectionChangedError(
        "the datastore connection was re-established while a read of new entries was in flight",
      );
    }
    const others = this.othersIn(pendingReply);
    const entries = firstStreamEntries(reply).map((item) => {
      const [id, fields] = item as [string, string[]];
      return { id, fields };
    });
    const durable =
      entries.length > 0
        ? () => this.durableThroughRead(reader, generation, false, abandon)
        : () => Promise.resolve();
    return { entries, othersPending: others, durable };
  }

  /**
   * Under aof-replicated, returns once everything read so far is fsynced on the primary and
   * a replica: an event of a commit the datastore could still lose must not be published.
   * WAITAOF covers the writes of its own connection, so a write made after the read (its
   * offset is past every entry read) gives it something to cover: sent right behind the
   * read, or on its own when `barrier` (the read itself cannot be
   * relied on: a blocking read served when an entry arrived was seen to leave the wait
   * nothing to cover, and a re-read of pending entries writes nothing). The read, the
   * barrier and the wait must all
   * be on the connection of `generation` (taken before the read): after a reconnect the
   * wait would answer for a fresh connection that wrote nothing, and a read resent by the
   * client could have skipped entries that an earlier attempt moved into the pending list.
   * Either way the read fails; its entries stay pending and the next session delivers them
   * in order.
   */
  private async durableThroughRead(
    reader: Valkey,
    generation: number,
    barrier: boolean,
    abandon: () => boolean,
  ): Promise<void> {
    if (this.durability === null) return;
    if (barrier) await reader.call("EVAL", ...this.barrierCommand());
    const { timeoutMs, observeWaitMs: _, ...rule } = this.durability;
    const waitedMs = await waitDurable(reader, timeoutMs, {
      abandon,
      writtenOn: generation,
      ...rule,
    });
    this.durability.observeWaitMs(waitedMs);
  }

  /**
   * EVAL's arguments for the barrier write (markerWriteScript). EVAL rather than EVALSHA: it is
   * pipelined behind the read, where a NOSCRIPT fallback would be sent only after the reply.
   */
  private barrierCommand(): (string | number)[] {
    return [
      markerWriteScript.source,
      1,
      this.keys.outboxReadBarrier,
      this.consumer,
      READ_BARRIER_TTL_MS,
    ];
  }

  /** How many entries are pending for consumers other than this one (0 when the group is missing). */
  async othersPending(): Promise<number> {
    try {
      return this.othersIn(await this.writer.call("XPENDING", this.keys.events, this.group));
    } catch (error) {
      if (isMissingGroup(error)) return 0;
      throw error;
    }
  }

  /** Entries pending for other consumers in an XPENDING summary reply. */
  private othersIn(summary: unknown): number {
    const reply = summary as [number, string | null, string | null, [string, string][] | null];
    let others = 0;
    for (const [consumer, count] of reply[3] ?? [])
      if (consumer !== this.consumer) others += Number(count);
    return others;
  }

  /**
   * Removes consumers other than this one that have nothing pending and have been idle at
   * least `minIdleMs` (earlier incarnations of this outbox), atomically (see the script).
   */
  async forgetIdleConsumers(minIdleMs: number): Promise<number> {
    const removed = await runScript(
      this.writer,
      forgetIdleConsumersScript,
      [this.keys.events],
      [this.group, this.consumer, minIdleMs],
    );
    return Number(removed);
  }

  /** Advances the stream past delivered entries: XACK, XDEL and HDEL of attempt counters, atomically. */
  async acknowledge(items: readonly AckItem[]): Promise<void> {
    if (items.length === 0) return;
    const clear = this.attemptsMayExist;
    const recordedBefore = this.attemptsRecorded;
    const args = [this.group, String(items.length)];
    for (const item of items) args.push(item.entryId);
    if (clear) {
      for (const item of items) if (item.eventId.length > 0) args.push(item.eventId);
    }
    const left = await runEncodedScript(
      this.writer,
      acknowledgeScript,
      [this.keys.events, this.keys.outboxAttempts],
      args,
    );
    // Only an empty hash, with no attempts recorded meanwhile, clears the flag.
    if (clear && left === 0 && this.attemptsRecorded === recordedBefore) {
      this.attemptsMayExist = false;
    }
  }

  /** Moves an undecodable entry to the dead-letter stream with its XACK and XDEL, atomically. */
  async deadLetter(entry: StreamEntry, reason: string): Promise<void> {
    const even = entry.fields.length % 2 === 0 ? entry.fields : entry.fields.slice(0, -1);
    // An entry with thousands of fields would not fit the script's unpack, and failing here
    // would stop the partition at it: the excess is dropped and counted instead.
    // Room left beside reason and source-id (4 values) and a dropped-fields pair (2).
    const room = DEAD_LETTER_MAX_VALUES - 6;
    const fields =
      even.length <= room
        ? even
        : [...even.slice(0, room - 2), "dropped-fields", String((even.length - room + 2) / 2)];
    await runScript(
      this.writer,
      deadLetterScript,
      [this.keys.events, this.keys.eventsDeadLetter],
      [this.group, entry.id, ...fields, "reason", reason, "source-id", entry.id],
    );
  }

  /** Counts one more publish attempt for each event (visible to operators in outbox-attempts). */
  async recordAttempts(eventIds: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    this.attemptsMayExist = true;
    this.attemptsRecorded++;
    await runEncodedScript(this.writer, recordAttemptsScript, [this.keys.outboxAttempts], eventIds);
  }

  /**
   * Pending count, length and oldest entry, read on `valkey` (the metrics connection);
   * zeros when the stream or group is missing, null when the datastore is unreachable or
   * answers with an error. Never throws.
   */
  async stats(valkey: Valkey): Promise<StreamStats | null> {
    try {
      const reply = await valkey
        .pipeline()
        .xlen(this.keys.events)
        .call("XPENDING", this.keys.events, this.group)
        .xrange(this.keys.events, "-", "+", "COUNT", 1)
        .exec();
      if (!reply) return null;
      const [lengthReply, pendingReply, oldestReply] = reply;
      // XPENDING fails with NOGROUP while the group is missing: that is 0 pending. Any other
      // failed reply (a command timeout, a lost connection: ioredis resolves the pipeline with
      // each command's error) means nothing is known, and zeros would read as "drained".
      const pendingMissing = pendingReply?.[0] ? isMissingGroup(pendingReply[0]) : false;
      if (lengthReply?.[0] || oldestReply?.[0] || (pendingReply?.[0] && !pendingMissing)) {
        return null;
      }
      const length = Number(lengthReply?.[1] ?? 0);
      const pending = pendingMissing
        ? 0
        : Number((pendingReply?.[1] as unknown[] | undefined)?.[0] ?? 0);
      const oldest = (oldestReply?.[1] as [string, string[]][] | undefined) ?? [];
      const first = oldest[0]?.[0];
      return { pending, length, oldestEntryMs: first ? entryTimeMs(first) : null };
    } catch {
      return null;
    }
  }
}

function firstStreamEntries(reply: unknown): unknown[] {
  if (!Array.isArray(reply) || reply.length === 0) return [];
  const stream = reply[0] as [string, unknown[]];
  return stream[1] ?? [];
}
