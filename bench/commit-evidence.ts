/**
 * What a consumer can see of a commit that did not survive a failover, from the events alone:
 * a partition sequence number that named two different events (a lost commit's number given
 * again to the commit that replaced it), and an event id that arrived from two commits (a
 * different sequence number or stream offset: the command ran again after its first commit
 * was lost, so an event of the lost one was delivered). A republished copy of one stream
 * entry has the same number, offset and bytes, and counts as neither.
 */

export interface CommitEvidenceCounts {
  /** Sequence numbers that named more than one event (by id or bytes). */
  reusedSequences: number;
  /** Event ids that arrived with more than one (sequence, offset): delivered from two commits. */
  eventsFromTwoCommits: number;
}

export class CommitEvidence {
  /** Per sequence number, the first event id and payload hash seen with it. */
  private readonly bySequence = new Map<string, string>();
  /** Per event id, the first `sequence@offset` it arrived with. */
  private readonly byEvent = new Map<string, string>();
  private readonly reused = new Set<string>();
  private readonly twice = new Set<string>();

  record(
    eventId: string,
    sequence: string | undefined,
    offset: string | undefined,
    body: Uint8Array,
  ): void {
    const identity = `${eventId}#${Bun.hash(body)}`;
    if (sequence !== undefined) {
      const before = this.bySequence.get(sequence);
      if (before === undefined) this.bySequence.set(sequence, identity);
      else if (before !== identity) this.reused.add(sequence);
    }
    const place = `${sequence}@${offset}`;
    const seen = this.byEvent.get(eventId);
    if (seen === undefined) this.byEvent.set(eventId, place);
    else if (seen !== place) this.twice.add(eventId);
  }

  counts(): CommitEvidenceCounts {
    return { reusedSequences: this.reused.size, eventsFromTwoCommits: this.twice.size };
  }
}
