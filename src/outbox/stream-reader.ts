/**
 * The outbox's view of the partition's events stream and its consumer group: create
 * the group, read this consumer's own pending entries, claim a dead consumer's, read
 * new ones, and advance the stream (XACK + XDEL + HDEL in one atomic script). Reads and
 * writes use separate connections so a blocking read never delays an acknowledgement.
 */
import { connectionGeneration, replyCode, type Valkey } from "../infra/valkey/client";
import { waitDurable } from "../infra/valkey/durability";
import type { PartitionKeys } from "../infra/valkey/keys";
import { runEncodedScript, runScript } from "../infra/valkey/lua-script";
import { entryTimeMs, type StreamEntry } from "./envelope";
import { acknowledgeScript, forgetIdleConsumersScript, readBarrierScript } from "./scripts";

/** The barrier key outlives an idle outbox's reads (one per block period) by far. */
const READ_BARRIER_TTL_MS = 60_000;

/** An operating error of the stream: `code` is the datastore's reply code when there is one. */
export class StreamError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

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

export interface NewEntries {
  entries: StreamEntry[];
  /** Entries pending for other consumers right after the read. */
  othersPending: number;
}

export interface AckItem {
  entryId: string;
  eventId: string;
}

/** Under aof-replicated: how long a read waits for its entries' fsync, and where the wait is told. */
export interface ReadDurability {
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
  ) {}

  /**
   * Creates the group at id 0 (so a backlog written before the group existed is
   * delivered) and the stream with it; an existing group is fine.
   */
  async ensureGroup(): Promise<boolean> {
    // A new session: an earlier lease holder may have left attempt counters behind.
    this.attemptsMayExist = true;
    // Looked up first: at maxmemory (noeviction) the datastore refuses XGROUP CREATE even for
    // a group that exists, and every session starts here, so a session that ended while the
    // datastore was full (a broker outage is what lets a backlog fill it) could never start
    // again to drain it.
    if (await this.groupExists()) return false;
    try {
      await this.writer.call("XGROUP", "CREATE", this.keys.events, this.group, "0", "MKSTREAM");
      return true;
    } catch (error) {
      if (replyCode(error) === "BUSYGROUP") return false;
      throw error;
    }
  }

  /** Whether the stream exists and has this group (a read, so the datastore never refuses it). */
  private async groupExists(): Promise<boolean> {
    let groups: unknown;
    try {
      groups = await this.writer.call("XINFO", "GROUPS", this.keys.events);
    } catch (error) {
      // No stream yet ("ERR no such key"): XGROUP CREATE ... MKSTREAM makes both.
      if (error instanceof Error && /no such key/i.test(error.message)) return false;
      throw error;
    }
    if (!Array.isArray(groups)) return false;
    return groups.some((fields) => {
      if (!Array.isArray(fields)) return false;
      const at = fields.indexOf("name");
      return at >= 0 && String(fields[at + 1]) === this.group;
    });
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
    if (entries.length > 0) await this.durableThroughRead(generation, true, abandon);
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
   * New entries (`>`), waiting up to `blockMs` when there are none (0 = do not wait), with how
   * many entries other consumers had pending right after the read. A read that does not wait
   * goes in one MULTI with the pending count, so a backlog costs no extra round trip.
   */
  async readNew(
    count: number,
    blockMs: number,
    abandon: () => boolean = () => false,
  ): Promise<NewEntries> {
    const read: (string | number)[] = ["GROUP", this.group, this.consumer, "COUNT", count];
    if (blockMs > 0) read.push("BLOCK", blockMs);
    read.push("STREAMS", this.keys.events, ">");
    let reply: unknown;
    let others: number;
    const generation = connectionGeneration(this.reader);
    if (blockMs > 0) {
      // The barrier goes out right behind the blocking read: the server runs it as soon as
      // the read is served, in the same pass, so it costs no round trip or fsync of its own.
      // (When the read times out empty, it is one small write per block period.)
      // The pending count rides behind it too, so it is taken right after the read as well.
      const [readReply, , pendingReply] = await Promise.all([
        this.reader.call("XREADGROUP", ...read),
        this.durability !== null ? this.reader.call("EVAL", ...this.barrierCommand()) : undefined,
        this.reader.call("XPENDING", this.keys.events, this.group),
      ]);
      reply = readReply;
      others = this.othersIn(pendingReply);
    } else {
      const transaction = this.reader
        .multi()
        .call("XREADGROUP", ...read)
        .call("XPENDING", this.keys.events, this.group);
      // The barrier rides in the transaction: a read that does not wait follows a full batch,
      // so it almost always returns entries.
      if (this.durability !== null) transaction.call("EVAL", ...this.barrierCommand());
      const results = await transaction.exec();
      if (results === null) throw new StreamError("EXECABORT", "read transaction was aborted");
      const [[readError, readReply], [pendingError, pendingReply]] = results as [
        [Error | null, unknown],
        [Error | null, unknown],
      ];
      if (readError) throw readError;
      if (pendingError) throw pendingError;
      const barrierError = results[2]?.[0];
      if (barrierError) throw barrierError;
      reply = readReply;
      others = this.othersIn(pendingReply);
    }
    const entries = firstStreamEntries(reply).map((item) => {
      const [id, fields] = item as [string, string[]];
      return { id, fields };
    });
    if (entries.length > 0) await this.durableThroughRead(generation, false, abandon);
    return { entries, othersPending: others };
  }

  /**
   * Under aof-replicated, returns once everything read so far is fsynced on the primary and
   * a replica: an event of a commit the datastore could still lose must not be published.
   * WAITAOF covers the writes of its own connection, so a write made after the read (its
   * offset is past every entry read) gives it something to cover: in the read's transaction,
   * right behind a blocking read, or on its own when `barrier` (the read itself cannot be
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
    generation: number,
    barrier: boolean,
    abandon: () => boolean,
  ): Promise<void> {
    if (this.durability === null) return;
    if (barrier) await this.reader.call("EVAL", ...this.barrierCommand());
    const durability = this.durability;
    const waitedMs = await waitDurable(this.reader, durability.timeoutMs, {
      abandon,
      writtenOn: generation,
    });
    durability.observeWaitMs(waitedMs);
  }

  /**
   * EVAL's arguments for the barrier write (readBarrierScript). EVAL rather than EVALSHA: it
   * also goes inside a transaction, where an unknown SHA would fail only at EXEC.
   */
  private barrierCommand(): (string | number)[] {
    return [
      readBarrierScript.source,
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
    const fields = entry.fields.length % 2 === 0 ? entry.fields : entry.fields.slice(0, -1);
    const tx = this.writer
      .multi()
      .xadd(this.keys.eventsDeadLetter, "*", ...fields, "reason", reason, "source-id", entry.id)
      .xack(this.keys.events, this.group, entry.id)
      .xdel(this.keys.events, entry.id);
    checkExec(await tx.exec(), "dead-letter");
  }

  /** Counts one more publish attempt for each event (visible to operators in outbox-attempts). */
  async recordAttempts(eventIds: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    this.attemptsMayExist = true;
    this.attemptsRecorded++;
    const tx = this.writer.multi();
    for (const eventId of eventIds) tx.hincrby(this.keys.outboxAttempts, eventId, 1);
    checkExec(await tx.exec(), "record attempts");
  }

  /**
   * Pending count, length and oldest entry, read on `valkey` (the metrics connection);
   * zeros when the stream or group is missing, null when the datastore is unreachable.
   * Never throws.
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
      const length = lengthReply?.[0] ? 0 : Number(lengthReply?.[1] ?? 0);
      // XPENDING fails with NOGROUP while the group is missing: that is 0 pending, not an error.
      const pending = pendingReply?.[0]
        ? 0
        : Number((pendingReply?.[1] as unknown[] | undefined)?.[0] ?? 0);
      const oldest = oldestReply?.[0]
        ? []
        : ((oldestReply?.[1] as [string, string[]][] | undefined) ?? []);
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

function checkExec(result: [Error | null, unknown][] | null, what: string): void {
  if (result === null) throw new StreamError("EXECABORT", `${what} transaction was aborted`);
  for (const [error] of result) {
    if (error) throw new StreamError(replyCode(error) ?? "ERR", `${what} failed: ${error.message}`);
  }
}
