/**
 * Turns one stream entry into something publishable: the raw envelope bytes (sent as
 * they are, never re-serialised), its event id and type, and the exchange the contract
 * routes that type to. An entry that cannot be published says why, for the dead letter.
 */
import { eventExchanges } from "../infra/amqp/topology";
import { SHORTSTR_MAX } from "../infra/amqp/wire";

export type EventType = keyof typeof eventExchanges;

/** One stream entry as read: its id and its flat field/value list. */
export interface StreamEntry {
  id: string;
  fields: string[];
}

export interface OutboxEvent {
  entryId: string;
  eventId: string;
  type: EventType;
  exchange: string;
  /** The envelope exactly as stored, written into the frame as UTF-8. */
  body: string;
  /** The entry's per-partition sequence number (`seq`); undefined on entries written without one. */
  sequence: string | undefined;
  /** The command whose event it is ("" when the envelope names none). */
  commandId: string;
  /** Known to be its command's last event: published with `x-command-last` (see delivery.ts). */
  commandLast: boolean;
}

export type Decoded = { ok: true; event: OutboxEvent } | { ok: false; reason: string };

function isEventType(value: unknown): value is EventType {
  return typeof value === "string" && Object.hasOwn(eventExchanges, value);
}

export function decodeEntry(entry: StreamEntry): Decoded {
  let raw: string | undefined;
  let sequence: string | undefined;
  for (let i = 0; i + 1 < entry.fields.length; i += 2) {
    const field = entry.fields[i];
    if (field === "event") raw ??= entry.fields[i + 1];
    else if (field === "seq") sequence ??= entry.fields[i + 1];
  }
  if (raw === undefined) return { ok: false, reason: "entry has no `event` field" };
  let envelope: unknown;
  try {
    envelope = JSON.parse(raw);
  } catch (error) {
    return { ok: false, reason: `event is not JSON: ${(error as Error).message}` };
  }
  if (typeof envelope !== "object" || envelope === null || Array.isArray(envelope)) {
    return { ok: false, reason: "event is not a JSON object" };
  }
  const { eventId, type, commandId } = envelope as {
    eventId?: unknown;
    type?: unknown;
    commandId?: unknown;
  };
  if (typeof eventId !== "string" || eventId.length === 0) {
    return { ok: false, reason: "event has no eventId" };
  }
  // The event id is sent as the message id, an AMQP short string: a longer one can never be
  // published, and retrying it would hold up the partition behind it for ever.
  // (At most 3 bytes a UTF-16 unit: a short id needs no counting, and ids are short.)
  const idBytes = eventId.length > SHORTSTR_MAX / 3 ? Buffer.byteLength(eventId) : 0;
  if (idBytes > SHORTSTR_MAX) {
    return {
      ok: false,
      reason: `eventId takes ${idBytes} bytes in UTF-8; a message id holds at most ${SHORTSTR_MAX}`,
    };
  }
  if (!isEventType(type)) {
    return { ok: false, reason: `unknown event type ${JSON.stringify(type)}` };
  }
  return {
    ok: true,
    event: {
      entryId: entry.id,
      eventId,
      type,
      exchange: eventExchanges[type],
      body: raw,
      sequence,
      commandId: typeof commandId === "string" ? commandId : "",
      commandLast: false,
    },
  };
}

/** The millisecond part of a stream id ("1700000000000-3" -> 1700000000000). */
export function entryTimeMs(entryId: string): number {
  const dash = entryId.indexOf("-");
  return Number(dash < 0 ? entryId : entryId.slice(0, dash));
}

/**
 * Marks each event known to be the last its command's commit wrote: the next entry is
 * another command's, or it ends a batch that `complete` says ends a commit (a read that
 * took all there was: a commit adds its entries at once). An entry that cannot be decoded,
 * or names no command, leaves the one before it unmarked. A consumer that sees the mark
 * need not wait for more of the command's events (the feed publishes its change set at once).
 */
export function markCommandEnds(batch: Decoded[], complete: boolean): Decoded[] {
  for (let i = 0; i < batch.length; i++) {
    const decoded = batch[i]!;
    if (!decoded.ok || decoded.event.commandId === "") continue;
    const next = batch[i + 1];
    if (next === undefined) decoded.event.commandLast = complete;
    else if (next.ok && next.event.commandId !== "") {
      decoded.event.commandLast = next.event.commandId !== decoded.event.commandId;
    }
  }
  return batch;
}
