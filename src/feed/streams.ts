/**
 * A feed stream: the messages of one pair on one channel (the book at one depth, L3, or
 * trades), each chained to the one before by `prevSeq`, with its subscribers and the last
 * messages kept so a client that lost its connection can resume without a new snapshot.
 */

/** A client connection as the streams see it. */
export interface Subscriber {
  /** Sends one message; false when the client was cut off for being too slow. */
  send(text: string): boolean;
}

/**
 * Sends a message to the `members` sockets subscribed to a topic (see FeedHub.broadcast).
 */
export type Broadcast = (topic: string, text: string, members: number) => void;

/** Topics are numbered: a stream dropped and made again is a new topic, with new members. */
let topicsMade = 0;

interface Kept {
  prevSeq: number;
  seq: number;
  text: string;
}

export class FeedStream {
  readonly subscribers = new Set<Subscriber>();
  /** The topic its subscribers' sockets join once they hold its latest state. */
  readonly topic = `s${++topicsMade}`;
  private readonly kept: Kept[] = [];
  private start = 0;

  /** `lastSeq`: the pair's sequence the stream starts from (its first message's prevSeq). */
  constructor(
    public lastSeq: number,
    private readonly keep: number,
    private readonly broadcast: Broadcast,
  ) {}

  /** Sends a message chained after the last one to every subscriber, and keeps it. */
  publish(seq: number, build: (prevSeq: number) => string): void {
    const text = build(this.lastSeq);
    if (this.keep > 0) {
      this.kept.push({ prevSeq: this.lastSeq, seq, text });
      // Dropped in chunks: shifting one at a time would cost a copy per message.
      if (this.kept.length - this.start > this.keep) this.start++;
      if (this.start > this.keep) {
        this.kept.splice(0, this.start);
        this.start = 0;
      }
    }
    this.lastSeq = seq;
    if (this.subscribers.size === 0) return;
    this.broadcast(this.topic, text, this.subscribers.size);
  }

  /**
   * The messages after `seq`, in order, when the stream still holds them all ([] when `seq`
   * is the last one sent); undefined when it does not (a snapshot is needed).
   */
  since(seq: number): string[] | undefined {
    if (seq === this.lastSeq) return [];
    for (let i = this.start; i < this.kept.length; i++) {
      if (this.kept[i]!.prevSeq === seq) return this.kept.slice(i).map((k) => k.text);
    }
    return undefined;
  }

  /** Forgets the kept messages: after a resynchronisation they chain to nothing. */
  reset(lastSeq: number): void {
    this.kept.length = 0;
    this.start = 0;
    this.lastSeq = lastSeq;
  }
}
