/**
 * The conductor's view of Valkey, the source of truth: ownership epochs for fencing,
 * batch lookups of dedup markers, the fenced atomic commit, the durability wait, and
 * loading the partition's books (resting orders, stops and halts) back into the engine.
 */
import type {
  HaltedPair,
  RestingOrder,
  Side,
  StopKind,
  StopOrder,
  StpMode,
  TimeInForce,
} from "../domain/index";
import { connectionGeneration, type Valkey } from "../infra/valkey/client";
import {
  type DurabilityRule,
  waitDurable,
  writeMarkerAndWaitDurable,
} from "../infra/valkey/durability";
import type { PartitionKeys } from "../infra/valkey/keys";
import { luaScript, runEncodedScript, runScript } from "../infra/valkey/lua-script";
import { type CommitBuilder, commitScript, orderHashFields, stopHashFields } from "./commit-script";
import { storedResultJson } from "./stored-result";

/** The commit script, run by SHA (its source once, after a restart or SCRIPT FLUSH). */
const commitLua = luaScript("commit", commitScript);

/**
 * Draws the next epoch and makes it the partition's owner epoch, atomically: a separate INCR
 * and SET could let a slower claimant overwrite a newer epoch with its older one.
 * KEYS[1] = the epoch counter, KEYS[2] = owner-epoch, ARGV[1] = the highest epoch the
 * claimant has seen (a datastore that lost its keys must not issue it again). Returns the new
 * epoch and the owner epoch it replaced (0 when there was none).
 */
const claimOwnershipLua = luaScript(
  "claim-ownership",
  `local epoch = redis.call('INCR', KEYS[1])
local current = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(ARGV[1]))
if current >= epoch then
  epoch = current + 1
  redis.call('SET', KEYS[1], epoch)
end
redis.call('SET', KEYS[2], epoch)
return {epoch, current}
`,
);

export class FencedError extends Error {
  readonly code = "FENCED";
  constructor(
    message: string,
    /** True when the epoch key is gone: the keyspace was reset, not taken over. */
    readonly keyspaceReset: boolean,
  ) {
    super(message);
  }
}

/**
 * The node a batch was about to be committed on, or looked up on, does not hold the history
 * the conductor matched on (a failover moved a connection onto a node that lacks a commit, or
 * has a different owner epoch): nothing was written; the batch is requeued and the books
 * reloaded from the node the writer reaches now.
 */
export class DivergedError extends Error {
  readonly code = "DIVERGED";
}

/**
 * The books changed while they loaded (another conductor committed meanwhile, or a failover
 * moved the connection): the load is thrown away and tried again.
 */
export class BooksMovedError extends Error {
  readonly code = "BOOKS_MOVED";
  constructor() {
    super("the books changed or the datastore connection moved while they loaded");
  }
}

export interface DedupLookup {
  /** Stored results of commands already processed, by command id. */
  stored: Map<string, string>;
  /** Order ids with an accepted-order marker. */
  accepted: Set<string>;
}

/** A connection writes went out on, and its connectionGeneration then (see waitDurable). */
export interface WrittenOn {
  valkey: Valkey;
  generation: number;
}

export class ConductorStore {
  constructor(
    /**
     * Claims ownership, loads the books and takes every other commit: WAITAOF waits for the
     * writes of its own connection.
     */
    private readonly writer: Valkey,
    private readonly keys: PartitionKeys,
    /**
     * Reads go on their own connection: the writer spends much of its time blocked in
     * WAITAOF for the previous batch, and a lookup queued behind it would wait too.
     */
    private readonly reader: Valkey = writer,
    /** Stored-result queries, which may wait for durability: never the reader's lookups. */
    private readonly queries: Valkey = reader,
    /** What every durability wait asks of the policy watch (FsyncPolicyWatch.rule). */
    private readonly rule: DurabilityRule = {},
    /**
     * Takes the commits the writer does not: they alternate. A WAITAOF blocks its connection
     * until it answers (a 2 ms slice at most), and the next batch's commit, sent while the
     * last one waits, would queue behind it on a shared connection.
     */
    private readonly committer: Valkey = writer,
  ) {}

  /**
   * Where the last commit that succeeded went out: its durability wait goes there too, and
   * the next commit to the other connection.
   */
  private lastCommit: WrittenOn | undefined;

  /**
   * The commit count the next commit builds on: the count read with the books, plus one per
   * commit since (see CommitBuilder's chain). Unknown (-1) until the first reload.
   */
  private chain = -1;

  /** The commit counter and the count the next batch builds on. */
  chainFor(): { key: string; builtOn: number } {
    return { key: this.keys.commitCount, builtOn: this.chain };
  }

  /** The commit count on the node the writer reaches now (0 before the first commit). */
  async readChain(): Promise<number> {
    return Number((await this.writer.get(this.keys.commitCount)) ?? 0);
  }

  /** Sets the count the next commit builds on: read with the books (Conductor.reload). */
  resetChain(count: number): void {
    this.chain = count;
  }

  /**
   * True while the fencing keys (outside the `matching:` prefix, which harnesses may delete)
   * exist: false means the datastore lost the partition's keys, not that a harness reset them.
   */
  async fencingIntact(): Promise<boolean> {
    return (await this.writer.exists(this.keys.ownerEpochCounter)) === 1;
  }

  /**
   * Takes ownership of the partition: every earlier owner's commits are fenced from now on.
   * The epoch comes from a counter that outlives a reset of the `matching:` keyspace, so a
   * stale owner's epoch can never be issued again and match after a reset.
   */
  async claimOwnership(
    durableWithinMs?: number,
    seenEpoch = 0,
  ): Promise<{ epoch: number; previous: number }> {
    const claimedOn = { valkey: this.writer, generation: connectionGeneration(this.writer) };
    const [epoch, previous] = (await runScript(
      this.writer,
      claimOwnershipLua,
      [this.keys.ownerEpochCounter, this.keys.ownerEpoch],
      [seenEpoch],
    )) as [number, number];
    // A claim a failover takes back would let the fenced owner commit again: durable first.
    if (durableWithinMs !== undefined) await this.waitDurable(durableWithinMs, claimedOn);
    return { epoch: Number(epoch), previous: Number(previous) };
  }

  /** The partition's current owner epoch (0 before any claim). */
  async ownerEpoch(): Promise<number> {
    return Number((await this.reader.get(this.keys.ownerEpoch)) ?? 0);
  }

  /**
   * Reads the dedup markers of a batch on the reader's connection, with the owner epoch and the
   * commit count in the same MGET: the reader may sit on another node than the writer (after a
   * failover), and its answer counts only when that node holds this conductor's epoch and every
   * commit it made. Throws DivergedError when not, FencedError when a newer epoch owns it.
   */
  async lookup(
    commandIds: readonly string[],
    orderIds: readonly string[],
    epoch: number,
  ): Promise<DedupLookup> {
    const stored = new Map<string, string>();
    const accepted = new Set<string>();
    if (commandIds.length + orderIds.length === 0) return { stored, accepted };
    const keys = [
      this.keys.ownerEpoch,
      this.keys.commitCount,
      ...commandIds.map((id) => this.keys.processedCommand(id)),
      ...orderIds.map((id) => this.keys.acceptedOrder(id)),
    ];
    const [epochSeen, countSeen, ...values] = await this.reader.mget(keys);
    this.checkReaderNode(epoch, epochSeen ?? null, Number(countSeen ?? 0));
    commandIds.forEach((id, i) => {
      const value = values[i];
      if (value != null) stored.set(id, storedResultJson(id, value));
    });
    orderIds.forEach((id, i) => {
      if (values[commandIds.length + i] != null) accepted.add(id);
    });
    return { stored, accepted };
  }

  /** See lookup. A missing epoch (a keyspace reset) is left to the commit, which is fenced. */
  private checkReaderNode(epoch: number, epochSeen: string | null, countSeen: number): void {
    if (epochSeen === null) return;
    if (Number(epochSeen) > epoch) {
      throw new FencedError(`FENCED ${epoch} ${epochSeen} (seen by the dedup lookup)`, false);
    }
    if (Number(epochSeen) !== epoch || countSeen !== this.chain) {
      throw new DivergedError(
        `the dedup lookup's node holds epoch ${epochSeen} and ${countSeen} commits, not ${epoch} and ${this.chain}: not the writer's history`,
      );
    }
  }

  /**
   * A command's stored result, answered only once it is durable when `durableWithinMs` is
   * given (aof-replicated): a result is stored by the commit, before its durability wait, and
   * one read then could still be lost with its commit. A marker written on the queries'
   * connection after the read, then WAITAOF for it, covers the result too (the AOF and the
   * replication stream are ordered). Throws DurabilityTimeoutError when the wait times out.
   */
  async storedResult(commandId: string, durableWithinMs?: number): Promise<string | null> {
    const connection = this.queries;
    // The lazy connection connects on first use: the read must know which connection it is on.
    if (connection.status === "wait") await connection.connect();
    const readOn = connectionGeneration(connection);
    const value = await connection.get(this.keys.processedCommand(commandId));
    const stored = value === null ? null : storedResultJson(commandId, value);
    if (stored === null || durableWithinMs === undefined) return stored;
    // The marker and the wait cover what the read saw only on the node it read from: a wait
    // that ends on another connection than the read's throws ConnectionChangedError.
    await writeMarkerAndWaitDurable(
      connection,
      this.keys.durabilityProbe,
      durableWithinMs,
      this.rule,
      readOn,
    );
    return stored;
  }

  /**
   * Runs a batch's commit (built on chainFor()); the next one builds on it, on the other
   * connection. Each commit checks the count it builds on, so two connections that a failover
   * left on different nodes cannot both commit (DIVERGED).
   */
  async commit(batch: CommitBuilder): Promise<void> {
    const valkey = this.lastCommit?.valkey === this.writer ? this.committer : this.writer;
    const on = { valkey, generation: connectionGeneration(valkey) };
    try {
      await runEncodedScript(valkey, commitLua, batch.keys, batch.args);
      this.chain++;
      this.lastCommit = on;
    } catch (error) {
      // Whatever happened, the count is not known any more: a reload reads it again.
      this.chain = -1;
      const message = (error as Error).message;
      if (message.startsWith("FENCED")) {
        throw new FencedError(message, message.endsWith(" false") || message.endsWith(" nil"));
      }
      if (message.startsWith("DIVERGED")) throw new DivergedError(message);
      throw error;
    }
  }

  /** The connection of the last commit that succeeded (see commit). */
  lastCommitOn(): WrittenOn {
    if (this.lastCommit === undefined) throw new Error("no commit has succeeded yet");
    return this.lastCommit;
  }

  /** Waits until the writes made on `on` (a connection, as it was then) are durable. */
  async waitDurable(timeoutMs: number, on: WrittenOn): Promise<number> {
    const waitedMs = await waitDurable(on.valkey, timeoutMs, {
      writtenOn: on.generation,
      ...this.rule,
    });
    this.onDurable();
    return waitedMs;
  }

  /** Called after every commit's durability wait that succeeded (FailoverTracker.durableWrite). */
  onDurable: () => void = () => undefined;

  /** Reads every resting order of the partition, in FIFO order per book side. */
  async loadRestingOrders(): Promise<RestingOrder[]> {
    const pairIds = await this.pairIds();
    const members: string[] = [];
    for (const pairId of pairIds) {
      for (const side of ["bid", "ask"] as const) {
        members.push(...(await this.writer.zrange(this.keys.bookRates(pairId, side), 0, -1)));
      }
    }
    const orders: RestingOrder[] = [];
    // Pipelined in chunks: one round trip per chunk, bounded memory per reply.
    const chunk = 5000;
    for (let start = 0; start < members.length; start += chunk) {
      const pipeline = this.writer.pipeline();
      // HMGET in the hash's fixed field order: plain arrays, cheaper than HGETALL objects.
      for (const member of members.slice(start, start + chunk)) {
        pipeline.hmget(this.keys.order(orderIdFromMember(member)), ...orderHashFields);
      }
      const replies = (await pipeline.exec()) ?? [];
      for (const [error, values] of replies) {
        if (error) throw error;
        orders.push(decodeOrder(values as (string | null)[]));
      }
    }
    orders.sort((a, b) => a.sequence - b.sequence);
    return orders;
  }

  /** Reads every stop order of the partition: pairs ascending, arrival order within a pair. */
  async loadStopOrders(): Promise<StopOrder[]> {
    const ids: string[] = [];
    for (const pairId of await this.pairIds()) {
      // Scored by sequence: ZRANGE gives arrival order.
      ids.push(...(await this.writer.zrange(this.keys.stopBook(pairId), 0, -1)));
    }
    const stops: StopOrder[] = [];
    const chunk = 5000;
    for (let start = 0; start < ids.length; start += chunk) {
      const pipeline = this.writer.pipeline();
      for (const id of ids.slice(start, start + chunk)) {
        pipeline.hmget(this.keys.stopOrder(id), ...stopHashFields);
      }
      const replies = (await pipeline.exec()) ?? [];
      for (const [error, values] of replies) {
        if (error) throw error;
        stops.push(decodeStop(values as (string | null)[]));
      }
    }
    return stops;
  }

  /** The engine's time as the last batch that moved it recorded it (0: never). */
  async loadClock(): Promise<number> {
    return Number((await this.writer.hget(this.keys.clock, "now")) ?? 0);
  }

  /** Reads every halted pair of the partition, ascending. */
  async loadHalts(): Promise<HaltedPair[]> {
    const halts = await this.writer.hgetall(this.keys.haltedPairs);
    return Object.entries(halts)
      .map(([pairId, reason]) => ({ pairId: Number(pairId), reason }))
      .sort((a, b) => a.pairId - b.pairId);
  }

  private async pairIds(): Promise<number[]> {
    return (await this.writer.smembers(this.keys.pairs)).map(Number).sort((a, b) => a - b);
  }

  stageRestingOrder(batch: CommitBuilder, order: RestingOrder): void {
    batch.replaceOrderHash(this.keys.order(order.id), encodeOrder(order));
    batch.zadd(this.keys.bookRates(order.pairId, order.side), order.price, bookMember(order));
    if (order.expireAt !== undefined) {
      batch.zadd(this.keys.deadlines, String(order.expireAt), `order:${order.id}`);
    }
  }

  stageStopOrder(batch: CommitBuilder, stop: StopOrder): void {
    batch.replaceStopHash(this.keys.stopOrder(stop.id), encodeStop(stop));
    // Rescored when an amend makes the stop arrive anew: the member is the order id alone.
    batch.zadd(this.keys.stopBook(stop.pairId), String(stop.sequence), stop.id);
    if (stop.expireAt !== undefined) {
      batch.zadd(this.keys.deadlines, String(stop.expireAt), `stop:${stop.id}`);
    }
  }

  stageRemovedStop(batch: CommitBuilder, stop: StopOrder): void {
    batch.zrem(this.keys.stopBook(stop.pairId), stop.id);
    batch.del(this.keys.stopOrder(stop.id));
    if (stop.expireAt !== undefined) batch.zrem(this.keys.deadlines, `stop:${stop.id}`);
  }

  stageHalt(batch: CommitBuilder, pairId: number, reason: string): void {
    batch.hset(this.keys.haltedPairs, String(pairId), reason);
  }

  stageResume(batch: CommitBuilder, pairId: number): void {
    batch.hdel(this.keys.haltedPairs, String(pairId));
  }

  /** A dead-man's switch's deadline, or its removal (undefined); `sweep`: a fired one's. */
  stageSession(batch: CommitBuilder, sweep: boolean, userId: string, deadline?: number): void {
    const key = sweep ? this.keys.cancelAfterSweeps : this.keys.cancelAfter;
    const member = `${sweep ? "sweep" : "switch"}:${userId}`;
    if (deadline === undefined) {
      batch.hdel(key, userId);
      batch.zrem(this.keys.deadlines, member);
    } else {
      batch.hset(key, userId, String(deadline));
      batch.zadd(this.keys.deadlines, String(deadline), member);
    }
  }

  /**
   * The earliest stored deadline after `afterMs` (undefined: none): the ones a batch has
   * passed are left out, whatever is stored before them.
   */
  async earliestDeadlineAfter(afterMs: number): Promise<number | undefined> {
    const [, score] = await this.writer.zrangebyscore(
      this.keys.deadlines,
      `(${afterMs}`,
      "+inf",
      "WITHSCORES",
      "LIMIT",
      0,
      1,
    );
    return score === undefined ? undefined : Number(score);
  }

  /** Armed switches (`sweep` false) or fired ones still sweeping, user id to deadline. */
  async loadSessions(sweep: boolean): Promise<[userId: string, deadline: number][]> {
    const key = sweep ? this.keys.cancelAfterSweeps : this.keys.cancelAfter;
    const entries = Object.entries(await this.writer.hgetall(key));
    return entries.map(([userId, deadline]) => [userId, Number(deadline)]);
  }

  /**
   * Records a pair that had a resting order or a stop (also one that left within a batch).
   * The caller stages each pair once per batch, in every batch that touches it: the set may be
   * deleted under a running conductor (a harness deleting keys in chunks), and an order
   * resting in a pair missing from it would be skipped by the next load.
   */
  stagePair(batch: CommitBuilder, pairId: number): void {
    batch.sadd(this.keys.pairs, String(pairId));
  }

  /** See connectionGeneration: compared around a commit and its durability wait. */
  writerConnection(): number {
    return connectionGeneration(this.writer);
  }

  /**
   * Resolves when the writing connections that are down now have connected again (after a
   * failover: to the newly promoted primary); never while both are connected. A retry can
   * start at once then.
   */
  writerReconnected(): Promise<void> {
    const down = [this.writer, this.committer].filter((valkey) => valkey.status !== "ready");
    if (down.length === 0) return new Promise(() => undefined);
    // One set of listeners per outage, however many retries wait on it.
    this.reconnected ??= Promise.all(
      down.map((valkey) => new Promise((resolve) => valkey.once("ready", resolve))),
    ).then(() => {
      this.reconnected = undefined;
    });
    return this.reconnected;
  }

  private reconnected: Promise<void> | undefined;

  /** Why the Sentinels forbid acknowledging on the writer's primary now (see DurabilityRule). */
  sentinelsForbid(): string | undefined {
    return this.rule.sentinelsForbid?.();
  }

  /** Resolves when the policy watch lifts a hold on every wait (never without a watch). */
  holdLifted(): Promise<void> {
    return this.rule.holdLifted?.() ?? new Promise(() => undefined);
  }

  stageRemovedOrder(batch: CommitBuilder, order: RestingOrder): void {
    batch.zrem(this.keys.bookRates(order.pairId, order.side), bookMember(order));
    batch.del(this.keys.order(order.id));
    if (order.expireAt !== undefined) batch.zrem(this.keys.deadlines, `order:${order.id}`);
  }

  /**
   * Removes the book member an order had under an earlier sequence: an amend that sent it to
   * the back of the queue changed its member, and the stored one would otherwise stay behind
   * (and load the order twice).
   */
  stageStaleMember(batch: CommitBuilder, order: RestingOrder, sequence: number): void {
    batch.zrem(this.keys.bookRates(order.pairId, order.side), bookMember({ ...order, sequence }));
  }
}

/** Zero-padded sequence first, so members with equal price (score) sort in time order. */
export function bookMember(order: RestingOrder): string {
  return `${String(order.sequence).padStart(16, "0")}:${order.id}`;
}

function orderIdFromMember(member: string): string {
  return member.slice(member.indexOf(":") + 1);
}

/** The order's hash values, in the order of `orderHashFields`. */
function encodeOrder(order: RestingOrder): string[] {
  return [
    order.id,
    order.userId,
    String(order.pairId),
    order.side,
    order.price,
    order.volume,
    order.volumeTotal,
    String(order.timestamp),
    String(order.sequence),
    String(order.priceDecimals),
    String(order.amountDecimals),
    String(order.quoteDecimals),
    order.stp,
    order.postOnly === true ? "1" : "0",
    String(order.expireAt ?? 0),
    order.displayVolume ?? "0",
    order.hiddenVolume ?? "0",
    order.listId ?? "",
    order.linkedOrderId ?? "",
  ];
}

/** The stop's hash values, in the order of `stopHashFields`. */
function encodeStop(stop: StopOrder): string[] {
  return [
    stop.id,
    stop.userId,
    String(stop.pairId),
    stop.side,
    stop.type,
    stop.price,
    stop.stopPrice,
    stop.volume,
    stop.volumeTotal,
    stop.quoteVolume,
    stop.timeInForce,
    stop.stp,
    String(stop.timestamp),
    String(stop.sequence),
    String(stop.priceDecimals),
    String(stop.amountDecimals),
    String(stop.quoteDecimals),
    String(stop.expireAt ?? 0),
    stop.listId ?? "",
    stop.linkedOrderId ?? "",
  ];
}

/** As decodeOrder: a stop book member without its whole hash fails the load loudly. */
function decodeStop(values: (string | null)[]): StopOrder {
  // The last fields, from expireAt on, are absent from hashes written before they were kept.
  if (values.some((value, i) => value === null && i < stopHashFields.indexOf("expireAt"))) {
    throw new Error(`stop order hash incomplete while loading books: ${JSON.stringify(values)}`);
  }
  const [
    id,
    userId,
    pairId,
    side,
    type,
    price,
    stopPrice,
    volume,
    volumeTotal,
    quoteVolume,
    timeInForce,
    stp,
    timestamp,
    sequence,
    pd,
    ad,
    qd,
    expireAt,
    listId,
    linkedOrderId,
  ] = values as string[];
  const stop: StopOrder = {
    id: id!,
    userId: userId!,
    pairId: Number(pairId),
    side: side as Side,
    type: type as StopKind,
    price: price!,
    stopPrice: stopPrice!,
    volume: volume!,
    volumeTotal: volumeTotal!,
    quoteVolume: quoteVolume!,
    timeInForce: timeInForce as TimeInForce,
    stp: stp as StpMode,
    timestamp: Number(timestamp),
    sequence: Number(sequence),
    priceDecimals: Number(pd),
    amountDecimals: Number(ad),
    quoteDecimals: Number(qd),
  };
  if (expireAt !== null && expireAt !== undefined && expireAt !== "0") {
    stop.expireAt = Number(expireAt);
  }
  if (linkedOrderId) {
    stop.listId = listId ?? "";
    stop.linkedOrderId = linkedOrderId;
  }
  return stop;
}

/** A book member without its order hash means the keyspace changed under us: fail the load loudly. */
function decodeOrder(values: (string | null)[]): RestingOrder {
  // The last fields, from postOnly on, are absent from hashes written before they were kept.
  if (values.some((value, i) => value === null && i < orderHashFields.indexOf("postOnly"))) {
    throw new Error(`order hash incomplete while loading books: ${JSON.stringify(values)}`);
  }
  // HMGET answered in orderHashFields' order.
  const [
    id,
    userId,
    pairId,
    side,
    price,
    volume,
    volumeTotal,
    timestamp,
    sequence,
    pd,
    ad,
    qd,
    stp,
    postOnly,
    expireAt,
    displayVolume,
    hiddenVolume,
    listId,
    linkedOrderId,
  ] = values as string[];
  const order: RestingOrder = {
    id: id!,
    userId: userId!,
    pairId: Number(pairId),
    side: side as Side,
    price: price!,
    volume: volume!,
    volumeTotal: volumeTotal!,
    timestamp: Number(timestamp),
    sequence: Number(sequence),
    priceDecimals: Number(pd),
    amountDecimals: Number(ad),
    quoteDecimals: Number(qd),
    stp: stp as StpMode,
  };
  // Only when set, as the engine reports it: a plain order has no postOnly field at all.
  if (postOnly === "1") order.postOnly = true;
  if (expireAt !== null && expireAt !== undefined && expireAt !== "0") {
    order.expireAt = Number(expireAt);
  }
  if (displayVolume !== null && displayVolume !== undefined && displayVolume !== "0") {
    order.displayVolume = displayVolume;
    order.hiddenVolume = hiddenVolume ?? "0";
  }
  if (linkedOrderId) {
    order.listId = listId ?? "";
    order.linkedOrderId = linkedOrderId;
  }
  return order;
}
