/**
 * The feed's subscribers: WebSocket connections, what each subscribed to, and the pairs'
 * streams they read. A change set is built into each stream's message once and broadcast to
 * the stream's topic; a client that leaves more than its buffer unread is cut off with a
 * reason and slows no one else.
 */

import type { ChangeSet, FeedBook } from "./feed-book";
import type { BookDepth, Channel } from "./messages";
import { PairStreams } from "./pair-streams";
import { type FeedRequest, parseRequest } from "./requests";
import type { FeedStream, Subscriber } from "./streams";

/** Sends a message to every socket subscribed to a topic (Bun's `server.publish`). */
export type TopicPublish = (topic: string, text: string) => void;

/** The socket under a connection (Bun's ServerWebSocket, or a test's). */
export interface ClientSocket {
  /** Bun's answer: bytes sent, -1 when queued behind unsent data, 0 when dropped. */
  send(text: string): number;
  bufferedAmount(): number;
  close(code: number, reason: string): void;
  /** From now on, what is published to the topic reaches this socket too, after what was sent. */
  subscribe(topic: string): void;
  unsubscribe(topic: string): void;
}

/** The books the hub serves, as the partition feed keeps them. */
export interface BookSource {
  /**
   * The pair's book; undefined when the pair is not this feed's partition's. An empty book of
   * a pair not seen yet is kept only when `keep` is not false.
   */
  book(pairId: number, keep?: boolean): FeedBook | undefined;
  /** Drops the pair's book if nothing has reached it. */
  forget(pairId: number): void;
  /** Publishes every change set collected so far, so a snapshot and the stream agree. */
  flush(): void;
  /** Why a pair is not served (the partition it belongs to), for the error message. */
  notServed(pairId: number): string;
}

export interface HubLimits {
  clientBufferBytes: number;
  maxSubscriptions: number;
  resumeMessages: number;
}

export interface HubCounters {
  slowClientsCut: number;
  messagesSent: number;
  resumes: number;
  snapshots: number;
}

/** WebSocket close codes the feed uses (4000-4999 are the application's). */
export const closeCodes = { slowConsumer: 4001, badRequests: 4002, stopping: 1001 } as const;

/** Bad requests one connection may send before it is closed. */
const badRequestLimit = 20;

/**
 * Subscribes a connection may send: a burst, then a steady rate. Each one can cost a snapshot
 * (an L3 one of a deep book is hundreds of kilobytes to build), so a client that keeps asking
 * must not take the feed's time from everyone else.
 */
export const subscribeBudget = { burst: 20, perSecond: 10 } as const;

export class FeedConnection implements Subscriber {
  readonly subscriptions = new Map<string, FeedStream>();
  badRequests = 0;
  closed = false;
  private budget: number = subscribeBudget.burst;
  private budgetAt = performance.now();

  constructor(
    readonly socket: ClientSocket,
    private readonly hub: FeedHub,
  ) {}

  send(text: string): boolean {
    if (this.closed) return false;
    const sent = this.socket.send(text);
    this.hub.counters.messagesSent++;
    return !this.hub.cutIfSlow(this, sent === 0);
  }

  reply(message: Record<string, unknown>): void {
    this.send(JSON.stringify(message));
  }

  /** Takes one subscribe from the budget; false when it is spent. */
  spendSubscribe(now = performance.now()): boolean {
    const refill = ((now - this.budgetAt) / 1000) * subscribeBudget.perSecond;
    this.budget = Math.min(subscribeBudget.burst, this.budget + refill);
    this.budgetAt = now;
    if (this.budget < 1) return false;
    this.budget--;
    return true;
  }
}

/** A connection holds one subscription per channel, pair and (for the book) depth. */
const key = (channel: Channel, pairId: number, depth: BookDepth) => `${channel}:${pairId}:${depth}`;
const pairOfKey = (id: string) => Number(id.split(":")[1]);

export class FeedHub {
  private readonly pairs = new Map<number, PairStreams>();
  readonly connections = new Set<FeedConnection>();
  readonly counters: HubCounters = { slowClientsCut: 0, messagesSent: 0, resumes: 0, snapshots: 0 };
  /**
   * How a stream's message reaches its subscribers: set to the server's publish once it
   * listens (nobody can subscribe before that). Bun copies the message into each socket's
   * buffer in native code and writes each socket once an event-loop turn, however many
   * messages the turn published; a send per subscriber from here cost a write each.
   */
  publishToTopic: TopicPublish = () => undefined;
  private readonly broadcast = (topic: string, text: string, members: number) => {
    this.counters.messagesSent += members;
    this.publishToTopic(topic, text);
  };

  constructor(
    private readonly books: BookSource,
    readonly limits: HubLimits,
  ) {}

  open(socket: ClientSocket): FeedConnection {
    const connection = new FeedConnection(socket, this);
    this.connections.add(connection);
    return connection;
  }

  /** Forgets a connection (closed by either side); idempotent. */
  closed(connection: FeedConnection): void {
    connection.closed = true;
    this.connections.delete(connection);
    const pairIds = new Set<number>();
    for (const [id, stream] of connection.subscriptions) {
      stream.subscribers.delete(connection);
      pairIds.add(pairOfKey(id));
    }
    connection.subscriptions.clear();
    for (const pairId of pairIds) this.release(pairId);
  }

  /**
   * Forgets the streams and the book of a pair that nothing has reached once no one reads it,
   * so subscribers naming pair ids at random leave nothing behind.
   */
  private release(pairId: number): void {
    const streams = this.pairs.get(pairId);
    if (streams === undefined || !streams.unread()) return;
    if (!this.books.book(pairId, false)?.untouched) return;
    this.pairs.delete(pairId);
    this.books.forget(pairId);
  }

  close(connection: FeedConnection, code: number, reason: string): void {
    if (connection.closed) return;
    this.closed(connection);
    connection.socket.close(code, reason);
  }

  receive(connection: FeedConnection, text: string): void {
    const parsed = parseRequest(text);
    if (!parsed.ok) {
      this.refuse(connection, parsed.error);
      return;
    }
    this.handle(connection, parsed.request);
  }

  /** Answers a request with an error; the 20th closes the connection. */
  private refuse(connection: FeedConnection, error: string): void {
    connection.reply({ type: "error", error });
    if (++connection.badRequests >= badRequestLimit) {
      this.close(connection, closeCodes.badRequests, `${badRequestLimit} bad requests`);
    }
  }

  /** One change set of a pair, to every stream of the pair. */
  publish(set: ChangeSet): void {
    this.pairs.get(set.pairId)?.publish(set);
  }

  /** The snapshot a REST client gets: the same seq a WebSocket subscriber would. */
  snapshot(
    pairId: number,
    channel: Channel,
    depth: BookDepth,
  ): Record<string, unknown> | undefined {
    this.books.flush();
    const streams = this.pairs.get(pairId);
    if (streams !== undefined) return streams.snapshot(channel, depth);
    // Nobody subscribes to the pair: its snapshot from streams made for this answer alone.
    const book = this.books.book(pairId, false);
    return book && new PairStreams(book, 0, this.broadcast).snapshot(channel, depth);
  }

  /** After the feed rebuilt its books: every subscriber gets a fresh snapshot. */
  rebuilt(reason: string): void {
    for (const [pairId, streams] of this.pairs) {
      const book = this.books.book(pairId);
      if (book === undefined) continue;
      streams.replaceBook(book);
      for (const { channel, depth, stream } of streams.streams()) {
        const text = JSON.stringify({ ...streams.snapshot(channel, depth), reason });
        for (const subscriber of stream.subscribers) subscriber.send(text);
      }
    }
  }

  heartbeat(seq: number): void {
    const text = JSON.stringify({ type: "heartbeat", seq, time: new Date().toISOString() });
    for (const connection of this.connections) connection.send(text);
  }

  private streamsOf(pairId: number): PairStreams | undefined {
    let streams = this.pairs.get(pairId);
    if (streams !== undefined) return streams;
    const book = this.books.book(pairId);
    if (book === undefined) return undefined;
    streams = new PairStreams(book, this.limits.resumeMessages, this.broadcast);
    this.pairs.set(pairId, streams);
    return streams;
  }

  private handle(connection: FeedConnection, request: FeedRequest): void {
    if (request.op === "ping") {
      connection.reply({ type: "pong" });
      return;
    }
    if (request.op === "unsubscribe") {
      this.unsubscribe(connection, request);
      return;
    }
    if (!connection.spendSubscribe()) {
      this.refuse(
        connection,
        `too many subscribes: at most ${subscribeBudget.perSecond} a second after ${subscribeBudget.burst}`,
      );
      return;
    }
    this.subscribe(connection, request);
  }

  /** Ends one subscription, or every depth of a pair's book when no depth is named. */
  private unsubscribe(
    connection: FeedConnection,
    request: Extract<FeedRequest, { op: "unsubscribe" }>,
  ): void {
    const { channel, pairId } = request;
    const prefix =
      request.depth === undefined ? `${channel}:${pairId}:` : key(channel, pairId, request.depth);
    let ended = 0;
    for (const [id, stream] of connection.subscriptions) {
      if (id !== prefix && !(request.depth === undefined && id.startsWith(prefix))) continue;
      this.leave(connection, stream);
      connection.subscriptions.delete(id);
      ended++;
    }
    this.release(pairId);
    connection.reply({ type: "unsubscribed", channel, pairId, ended });
  }

  private subscribe(
    connection: FeedConnection,
    request: Extract<FeedRequest, { op: "subscribe" }>,
  ): void {
    const { channel, pairId } = request;
    const depth: BookDepth = channel === "book" ? (request.depth ?? 10) : "all";
    const id = key(channel, pairId, depth);
    if (
      !connection.subscriptions.has(id) &&
      connection.subscriptions.size >= this.limits.maxSubscriptions
    ) {
      connection.reply({
        type: "error",
        error: `at most ${this.limits.maxSubscriptions} subscriptions a connection`,
      });
      return;
    }
    this.books.flush();
    const streams = this.streamsOf(pairId);
    if (streams === undefined) {
      connection.reply({ type: "error", error: this.books.notServed(pairId) });
      return;
    }
    const stream = channel === "book" ? streams.depth(depth) : streams.other(channel);
    const before = connection.subscriptions.get(id);
    if (before !== undefined) this.leave(connection, before);
    connection.subscriptions.set(id, stream);
    stream.subscribers.add(connection);
    const missed = request.resumeFrom === undefined ? undefined : stream.since(request.resumeFrom);
    connection.reply({ type: "subscribed", channel, pairId, depth, resumed: missed !== undefined });
    if (missed === undefined) {
      this.counters.snapshots++;
      connection.reply(streams.snapshot(channel, depth));
    } else {
      this.counters.resumes++;
      for (const text of missed) if (!connection.send(text)) return;
    }
    // Joined only now that it holds the stream's latest state: what is published from here on
    // chains to it. Bun keeps a socket's sends and publishes in the order they were made.
    if (!connection.closed) connection.socket.subscribe(stream.topic);
  }

  /** Ends a connection's subscription to a stream (its socket leaves the topic). */
  private leave(connection: FeedConnection, stream: FeedStream): void {
    stream.subscribers.delete(connection);
    if (!connection.closed) connection.socket.unsubscribe(stream.topic);
  }

  /**
   * Cuts off every client that has more than its buffer unread. Called on a timer: a message
   * broadcast to a topic does not pass through here, so its subscribers are checked apart.
   */
  cutSlowClients(): void {
    for (const connection of this.connections) this.cutIfSlow(connection);
  }

  /**
   * Cuts a client off with a reason when it has more than its buffer unsent (or `dropped`:
   * Bun refused a message for it); true when it did.
   */
  cutIfSlow(connection: FeedConnection, dropped = false): boolean {
    const unsent = connection.socket.bufferedAmount();
    if (!dropped && unsent <= this.limits.clientBufferBytes) return false;
    this.counters.slowClientsCut++;
    this.close(connection, closeCodes.slowConsumer, `slow consumer: ${unsent} bytes unsent`);
    return true;
  }
}
