/**
 * The event-order invariant of one partition's consumer: a stream offset (`x-partition-offset`)
 * never goes backwards, except on a copy of an event already received (a redelivery, or the
 * outbox publishing again from its first unconfirmed entry).
 */

/** `<ms>-<seq>` as one number that orders like the stream; undefined when not an offset. */
export function streamOffset(offset: string | undefined): bigint | undefined {
  const match = offset === undefined ? null : /^(\d+)-(\d+)$/.exec(offset);
  return match === null ? undefined : (BigInt(match[1]!) << 32n) + BigInt(match[2]!);
}

export class StreamOrderCheck {
  private highest = -1n;
  /** New events that arrived behind an offset already passed. */
  outOfOrder = 0;
  /** Events with no readable offset header: their order cannot be checked. */
  withoutOffset = 0;

  /**
   * Records one delivery; `copy` says its event id was received before. Only first copies
   * move the order on: a copy can run ahead (a resend of an event a resequencing consumer
   * still holds behind a gap), and the events before it are not late for that.
   */
  record(offset: string | undefined, copy: boolean): void {
    const at = streamOffset(offset);
    if (at === undefined) this.withoutOffset++;
    else if (copy) return;
    else if (at >= this.highest) this.highest = at;
    else this.outOfOrder++;
  }
}
