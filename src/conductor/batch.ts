/**
 * One group commit: decode a batch of deliveries, look up their dedup markers in one
 * round trip, apply them in order through the domain, stage every write in one fenced
 * atomic commit, then wait for the durability policy. Nothing is acknowledged here.
 */

import type { Config } from "../config/schema";
import {
  type CommandEnvelope,
  type CommandOutcome,
  type CommandResult,
  decodeCommand,
  type MatchingEngine,
  MatchingInvariantError,
  type RestingOrder,
  ResultCodes,
  resultCodeName,
} from "../domain/index";
import { decodeBody } from "../infra/amqp/codec";
import { killPoint } from "../infra/kill-point";
import type { PartitionKeys } from "../infra/valkey/keys";
import { tickFor } from "./clock";
import { CommitBuilder } from "./commit-script";
import { type Delivery, NUDGE_HEADER } from "./consumer";
import type { ConductorMetrics } from "./metrics";
import { commandOrderId, NetChanges, secondOrderId } from "./net-changes";
import type { ConductorStore, DedupLookup } from "./store";
import { encodeStoredResult } from "./stored-result";
import { CommandFaultError } from "./unmendable";

export interface BatchItem {
  delivery: Delivery;
  /** Absent for dead-lettered messages. */
  commandId?: string;
  /** The envelope's correlationId: a reply's, when the message carries no AMQP one. */
  correlationId?: string;
  /** False for a redelivered command answered from its stored result. */
  fresh: boolean;
  /** The JSON body of the reply and stored result (a dead-lettered message's reply only). */
  resultJson?: string;
  deadLetterReason?: string;
}

type Decoded =
  | { kind: "command"; command: CommandEnvelope }
  | {
      kind: "invalid";
      commandId: string;
      correlationId: string | undefined;
      outcome: () => CommandOutcome;
    }
  | { kind: "unreadable"; reason: string; commandId?: string }
  | { kind: "nudge" };

export interface BatchContext {
  config: Config;
  engine: MatchingEngine;
  store: ConductorStore;
  keys: PartitionKeys;
  metrics: ConductorMetrics;
  epoch: number;
  /**
   * Commands this process committed whose batch was never acknowledged (durability
   * timeout, lost channel), with their event counts. Their redelivery is their first
   * final outcome, not a duplicate, so the counters still reach one per command.
   */
  unacknowledged: Map<string, number>;
  /** The batch's time, epoch milliseconds: the wall clock, read once by the caller. */
  nowMs: number;
  /**
   * Whether the stored deadlines may hold the backlog marker (see stageBacklog); true after
   * a load, which cannot tell. Kept by the caller from batch to batch.
   */
  backlog: { marked: boolean };
}

/** Bound on remembered unacknowledged commands: a purged queue never redelivers them. */
const unacknowledgedMax = 100_000;

/**
 * Remembers committed commands whose batch was never acknowledged (see
 * BatchContext.unacknowledged), forgetting every earlier one past the bound.
 */
export function rememberUnacknowledged(
  unacknowledged: Map<string, number>,
  committed: readonly (readonly [commandId: string, events: number])[],
): void {
  if (unacknowledged.size > unacknowledgedMax) unacknowledged.clear();
  for (const [commandId, events] of committed) unacknowledged.set(commandId, events);
}

export interface OutcomeTally {
  events: number;
  accepted: number;
  rejected: number;
  duplicates: number;
  rested: number;
  cancelled: number;
  filled: number;
}

export interface CommittedBatch {
  items: BatchItem[];
  /** Counted into the metrics only once the batch is durable and acknowledged. */
  tally: OutcomeTally;
  /** Fresh commands this batch committed, with their event counts (see `unacknowledged`). */
  committed: [commandId: string, events: number][];
}

/**
 * Applies and atomically commits one batch; throws on any commit failure. The caller
 * waits for durability before acknowledging (possibly while the next batch is matched).
 */
export async function commitBatch(
  context: BatchContext,
  deliveries: readonly Delivery[],
): Promise<CommittedBatch> {
  const { store, metrics } = context;
  const t0 = performance.now();
  const decoded = deliveries.map((delivery) => decodeDelivery(context, delivery));
  const { commandIds, orderIds } = idsToLookUp(decoded);
  const t1 = performance.now();
  const { stored, accepted } = await store.lookup(commandIds, orderIds, context.epoch);
  const t2 = performance.now();
  const stage = newStage(context);
  stageTick(context, stage);
  for (let i = 0; i < decoded.length; i++) {
    stageItem(context, stage, decoded[i]!, deliveries[i]!, { stored, accepted });
  }
  stage.net.stage(store, stage.batch);
  const t3 = performance.now();
  await sendCommit(context, stage);
  const t4 = performance.now();
  metrics.decode.observe((t1 - t0) / 1000);
  metrics.lookup.observe((t2 - t1) / 1000);
  metrics.match.observe((t3 - t2) / 1000);
  metrics.commit.observe((t4 - t3) / 1000);
  return { items: stage.items, tally: stage.tally, committed: stage.committed };
}

/** What a batch stages as it applies its commands, one after another. */
interface BatchStage {
  batch: CommitBuilder;
  ttl: number;
  /** Results of commands seen earlier in this same batch: a redelivery inside one batch. */
  batchResults: Map<string, string>;
  items: BatchItem[];
  net: NetChanges;
  committed: [commandId: string, events: number][];
  tally: OutcomeTally;
}

function newStage({ config, store, keys, epoch }: BatchContext): BatchStage {
  return {
    batch: new CommitBuilder(keys.ownerEpoch, epoch, keys.eventSequence, store.chainFor()),
    ttl: config.dedupRetentionSeconds,
    batchResults: new Map(),
    items: [],
    net: new NetChanges(),
    committed: [],
    tally: {
      events: 0,
      accepted: 0,
      rejected: 0,
      duplicates: 0,
      rested: 0,
      cancelled: 0,
      filled: 0,
    },
  };
}

/**
 * The batch's clock.tick, first: it moves the engine's time to the batch's and expires what
 * that passed, so every command of the batch sees one time. The time is recorded with the
 * batch; the expiries' events go to the stream like any command's (no marker, no reply).
 */
/** A tick names no order, so it looks up no accepted-order marker. */
const noMarkers: ReadonlySet<string> = new Set();

function stageTick(context: BatchContext, stage: BatchStage): void {
  const { engine, config, keys } = context;
  const tick = tickFor(engine, config.partition, context.nowMs);
  if (tick === undefined) return;
  const { outcome } = applyItem(
    engine,
    { kind: "command", command: tick },
    tick.commandId,
    noMarkers,
  );
  stage.batch.hset(keys.clock, "now", String(engine.now()));
  for (const change of outcome.changes) stage.net.add(change, undefined, undefined);
  stageEvents(stage, keys, outcome);
  stageBacklog(context, stage);
}

/** The stored deadlines' member that stands for work a tick left to the next one. */
export const BACKLOG_MEMBER = "backlog";

/**
 * Work the tick left to the next (a switch's sweep, or expiries past its 1,000) is due again
 * a millisecond after the batch: stored as a deadline then, so a conductor that does not own
 * the partition sees it due and nudges the queue if the owner dies before its next tick
 * (service.ts nudgeIfDue); taken out again by the first tick that leaves nothing over.
 */
function stageBacklog({ engine, keys, backlog }: BatchContext, stage: BatchStage): void {
  const next = engine.nextExpiry();
  if (next !== undefined && next <= engine.now()) {
    stage.batch.zadd(keys.deadlines, String(engine.now() + 1), BACKLOG_MEMBER);
    backlog.marked = true;
  } else if (backlog.marked) {
    stage.batch.zrem(keys.deadlines, BACKLOG_MEMBER);
    backlog.marked = false;
  }
}

/** The command ids whose stored results, and the order ids whose markers, the batch needs. */
function idsToLookUp(decoded: readonly Decoded[]): { commandIds: string[]; orderIds: string[] } {
  const commandIds: string[] = [];
  const orderIds: string[] = [];
  for (const item of decoded) {
    if (item.kind === "command") {
      commandIds.push(item.command.commandId);
      // A place's id for the duplicate check, a cancel's or amend's target to tell a finished
      // order from an unknown one after a restart (the engine's memory of finished ids is lost).
      // Two ids without an array per command: this runs for every command of every batch.
      const orderId = commandOrderId(item.command);
      if (orderId !== undefined) orderIds.push(orderId);
      const second = secondOrderId(item.command);
      if (second !== undefined) orderIds.push(second);
    } else if (item.kind === "invalid") {
      commandIds.push(item.commandId);
    }
  }
  return { commandIds, orderIds };
}

/** One delivery: a dead letter, a redelivery answered from its stored result, or a fresh command. */
function stageItem(
  context: BatchContext,
  stage: BatchStage,
  item: Decoded,
  delivery: Delivery,
  { stored, accepted }: DedupLookup,
): void {
  // A conductor's nudge: acknowledged with the batch, nothing stored, nothing replied.
  if (item.kind === "nudge") {
    stage.items.push({ delivery, fresh: false });
    return;
  }
  if (item.kind === "unreadable") {
    // A request (replyTo) still gets an answer: its client would otherwise wait for ever.
    const resultJson = JSON.stringify(unreadableResult(item.reason, item.commandId));
    stage.items.push({ delivery, fresh: true, deadLetterReason: item.reason, resultJson });
    return;
  }
  const commandId = item.kind === "command" ? item.command.commandId : item.commandId;
  const correlationId = item.kind === "command" ? item.command.correlationId : item.correlationId;
  const earlier = stored.get(commandId) ?? stage.batchResults.get(commandId);
  const ids = { delivery, commandId, correlationId };
  if (earlier !== undefined) stageRedelivery(context, stage, item, ids, earlier);
  else stageFresh(context, stage, item, ids, accepted);
}

interface ItemIds {
  delivery: Delivery;
  commandId: string;
  correlationId: string | undefined;
}

/** A redelivery: the stored result, untouched book, after this batch's durability wait. */
function stageRedelivery(
  { keys, unacknowledged }: BatchContext,
  stage: BatchStage,
  item: Exclude<Decoded, { kind: "unreadable" } | { kind: "nudge" }>,
  ids: ItemIds,
  earlier: string,
): void {
  const { commandId } = ids;
  const ownEvents = stage.batchResults.has(commandId) ? undefined : unacknowledged.get(commandId);
  stage.batchResults.set(commandId, earlier);
  // A command still being redelivered keeps its markers alive: one held unacknowledged
  // longer than the dedup retention (a long replica outage under aof-replicated) would
  // otherwise find them expired at a later redelivery and be applied a second time.
  stage.batch.expire(keys.processedCommand(commandId), stage.ttl);
  if (item.kind === "command") {
    const orderId = commandOrderId(item.command);
    if (orderId !== undefined) stage.batch.expire(keys.acceptedOrder(orderId), stage.ttl);
    const second = secondOrderId(item.command);
    if (second !== undefined) stage.batch.expire(keys.acceptedOrder(second), stage.ttl);
  }
  if (ownEvents !== undefined) {
    // This process committed it but never acknowledged it: count it now, once.
    stage.tally.events += ownEvents;
    countOutcome(stage.tally, JSON.parse(earlier) as CommandResult);
    stage.items.push({ ...ids, fresh: true, resultJson: earlier });
    return;
  }
  stage.tally.duplicates++;
  stage.items.push({ ...ids, fresh: false, resultJson: earlier });
}

/** A command seen for the first time: applied through the domain, every write staged. */
function stageFresh(
  context: BatchContext,
  stage: BatchStage,
  item: Exclude<Decoded, { kind: "unreadable" } | { kind: "nudge" }>,
  ids: ItemIds,
  accepted: ReadonlySet<string>,
): void {
  const { keys } = context;
  const { commandId } = ids;
  const { outcome, amended } = applyItem(context.engine, item, commandId, accepted);
  outcome.result.transactTime = context.engine.now();
  const resultJson = JSON.stringify(outcome.result);
  stage.batchResults.set(commandId, resultJson);
  const { batch, ttl } = stage;
  batch.setWithTtl(keys.processedCommand(commandId), encodeStoredResult(outcome.result), ttl);
  if (outcome.alsoAcceptedOrderId !== undefined) {
    batch.setWithTtl(keys.acceptedOrder(outcome.alsoAcceptedOrderId), "1", ttl);
  }
  if (outcome.acceptedOrderId !== undefined) {
    batch.setWithTtl(keys.acceptedOrder(outcome.acceptedOrderId), "1", ttl);
  }
  for (const change of outcome.changes) {
    stage.net.add(change, outcome.acceptedOrderId, amended, outcome.alsoAcceptedOrderId);
  }
  stageEvents(stage, keys, outcome);
  countOutcome(stage.tally, outcome.result);
  stage.committed.push([commandId, outcome.events.length]);
  stage.items.push({ ...ids, fresh: true, resultJson });
}

/** A command's events onto the batch's stream entries, counted. */
function stageEvents(stage: BatchStage, keys: PartitionKeys, outcome: CommandOutcome): void {
  // Extension of the contract's envelope: `commandEvents`, how many events the command
  // emitted, so a consumer knows when it has all of a command's events.
  const suffix = `,"commandEvents":${outcome.events.length}}`;
  for (const event of outcome.events) {
    const json = JSON.stringify(event);
    stage.batch.xadd(keys.events, json.slice(0, -1) + suffix);
  }
  stage.tally.events += outcome.events.length;
}

/**
 * The domain's outcome of one command, and the state an amended order had before (an amend
 * may send it to the back of the queue, a new book member: the stored one must go).
 */
function applyItem(
  engine: MatchingEngine,
  item: Exclude<Decoded, { kind: "unreadable" } | { kind: "nudge" }>,
  commandId: string,
  accepted: ReadonlySet<string>,
): { outcome: CommandOutcome; amended: RestingOrder | undefined } {
  try {
    if (item.kind !== "command") return { outcome: item.outcome(), amended: undefined };
    const command = item.command;
    const amended =
      command.type === "order.amend" ? engine.getOrder(command.payload.id) : undefined;
    const orderId = commandOrderId(command);
    const second = secondOrderId(command);
    const acceptedBefore =
      (orderId !== undefined && accepted.has(orderId)) ||
      (second !== undefined && accepted.has(second));
    const outcome = engine.apply(command, acceptedBefore);
    return { outcome, amended };
  } catch (error) {
    // A broken invariant: the commit is never staged nor sent, so nothing of this batch
    // reaches Valkey; the books in memory may hold part of it, and the conductor halts the
    // partition rather than reloading them (see Conductor.halt). Any other exception is a
    // bug too, and would come back on every retry of the batch.
    if (!(error instanceof MatchingInvariantError)) throw new CommandFaultError(commandId, error);
    error.commandId ??= commandId;
    throw error;
  }
}

/** Sends the staged commit; remembers its fresh commands if its reply may have been lost. */
async function sendCommit({ store, keys, epoch, unacknowledged }: BatchContext, stage: BatchStage) {
  // A batch of pure redeliveries still writes one marker, so that WAITAOF covers the
  // offset of whatever an earlier owner wrote before it died (its expirations write nothing
  // when their keys are gone).
  const { batch } = stage;
  if (batch.mayWriteNothing) batch.setWithTtl(keys.conductorHeartbeat, String(epoch), 3600);
  killPoint("before-commit");
  try {
    await store.commit(batch);
  } catch (error) {
    // The commit may have run with its reply lost (a timeout, a dropped connection): then the
    // redelivery finds these commands' stored results, and must count them as their first
    // outcome, not as duplicates. A redelivery that finds no stored result applies them anew.
    rememberUnacknowledged(unacknowledged, stage.committed);
    throw error;
  }
  killPoint("after-commit");
}

/**
 * The reply to a message without a readable command id: refused as a bad envelope under the
 * engine's stand-in id, with no events; the message itself goes to the dead-letter queue.
 */
function unreadableResult(reason: string, commandId = "unidentified"): CommandResult {
  return {
    commandId,
    status: "rejected",
    code: ResultCodes.badEnvelope,
    codeName: resultCodeName(ResultCodes.badEnvelope),
    reason: `unreadable message, dead-lettered: ${reason}`,
    orderStatus: "rejected",
    events: 0,
  };
}

export function countTally(metrics: ConductorMetrics, tally: OutcomeTally): void {
  metrics.eventsCreated.inc(tally.events);
  metrics.accepted.inc(tally.accepted);
  metrics.rejected.inc(tally.rejected);
  metrics.duplicates.inc(tally.duplicates);
  metrics.rested.inc(tally.rested);
  metrics.cancelled.inc(tally.cancelled);
  metrics.filled.inc(tally.filled);
}

function countOutcome(tally: OutcomeTally, result: CommandResult): void {
  if (result.status === "accepted") tally.accepted++;
  else if (result.status === "rejected") tally.rejected++;
  else tally.duplicates++;
  if (result.orderStatus === "rested" || result.orderStatus === "partially-filled-rested")
    tally.rested++;
  else if (result.orderStatus === "filled") tally.filled++;
  else if (result.orderStatus === "cancelled") tally.cancelled++;
}

/**
 * Decodes one delivery, never throwing: a decoder fault on one message (a bug, since every
 * input should come back a reject) must not fail its batch, which would be redelivered and
 * fail again for ever, holding up every command behind it. The message is dead-lettered
 * with the fault as its reason instead, and its sender gets a rejected reply.
 */
function decodeDelivery(context: BatchContext, delivery: Delivery): Decoded {
  try {
    return decodeDeliveryUnguarded(context, delivery);
  } catch (error) {
    return {
      kind: "unreadable",
      reason: `the decoder failed on it: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}

/**
 * A command of another schema version is no bad command of this one: stored as a reject it
 * would be refused for the whole dedup window, even by a conductor that reads that version.
 * It is dead-lettered unrun instead, its bytes kept, and nothing is stored.
 */
function unknownSchemaVersion(body: unknown): Decoded | undefined {
  if (typeof body !== "object" || body === null || !("schemaVersion" in body)) return undefined;
  const { schemaVersion, commandId } = body as { schemaVersion: unknown; commandId?: unknown };
  if (schemaVersion === 1) return undefined;
  return {
    kind: "unreadable",
    reason: `schemaVersion ${JSON.stringify(schemaVersion)} is not one this conductor reads (1): not run, nothing stored`,
    ...(typeof commandId === "string" && commandId.length > 0 ? { commandId } : {}),
  };
}

function decodeDeliveryUnguarded(context: BatchContext, delivery: Delivery): Decoded {
  const { config, metrics } = context;
  // Checked before any parsing: a huge body would hold the partition's event loop (and its
  // memory) for as long as it takes to parse.
  if (delivery.message.properties.headers?.[NUDGE_HEADER] !== undefined) return { kind: "nudge" };
  const size = delivery.message.content.length;
  if (size > config.commandMaxBytes) {
    return {
      kind: "unreadable",
      reason: `message of ${size} bytes is larger than MATCHING_COMMAND_MAX_BYTES (${config.commandMaxBytes}); not decoded`,
    };
  }
  const body = decodeBody(delivery.message.content);
  if (!body.ok) return { kind: "unreadable", reason: body.reason };
  const unknownVersion = unknownSchemaVersion(body.value);
  if (unknownVersion !== undefined) return unknownVersion;
  const decoded = decodeCommand(body.value);
  if (!decoded.ok) return invalidCommand(context, delivery, decoded);
  const command = decoded.command;
  // The AMQP timestamp (epoch ms, set by the publisher) rather than submittedAt, which
  // deterministic workloads stamp with a fixed past epoch.
  const publishedMs = Number(delivery.message.properties.timestamp);
  if (publishedMs > 1e12)
    metrics.queueWait.observe(Math.max(0, delivery.receivedAtMs - publishedMs) / 1000);
  return refusedHere(context, delivery, command) ?? { kind: "command", command };
}

/** A command that did not decode: rejected when it names its id, else unreadable. */
function invalidCommand(
  { config, engine }: BatchContext,
  delivery: Delivery,
  decoded: Extract<ReturnType<typeof decodeCommand>, { ok: false }>,
): Decoded {
  const { commandId } = decoded;
  if (commandId === undefined) {
    return {
      kind: "unreadable",
      reason: `no readable commandId: ${decoded.code} ${decoded.reason}`,
    };
  }
  const correlationId =
    decoded.correlationId ?? delivery.message.properties.correlationId ?? commandId;
  return {
    kind: "invalid",
    commandId,
    correlationId: decoded.correlationId,
    outcome: () =>
      engine.reject(
        {
          commandId,
          correlationId,
          partition: config.partition,
          pairId: decoded.pairId,
          submittedAt: decoded.submittedAt,
          orderId: decoded.orderId,
          userId: decoded.userId,
        },
        decoded.code,
        decoded.reason,
      ),
  };
}

/**
 * A valid command this conductor must refuse: another partition's, or a pair command from a
 * broker user not listed as an operator.
 */
function refusedHere(
  { config, engine }: BatchContext,
  delivery: Delivery,
  command: CommandEnvelope,
): Decoded | undefined {
  const ownPartition = command.partition === config.partition;
  const pairPartition = command.pairId % config.partitionCount === config.partition;
  if (!ownPartition || !pairPartition) {
    const owner = command.pairId % config.partitionCount;
    return {
      kind: "invalid",
      commandId: command.commandId,
      correlationId: command.correlationId,
      outcome: () =>
        engine.reject(
          {
            commandId: command.commandId,
            correlationId: command.correlationId,
            partition: config.partition,
            pairId: command.pairId,
            submittedAt: command.submittedAt,
            orderId: commandOrderId(command),
          },
          ResultCodes.partitionMismatch,
          `command for partition ${command.partition} (pair ${command.pairId} mod ${config.partitionCount} = ${owner}) reached partition ${config.partition}`,
        ),
    };
  }
  if (command.type !== "pair.halt" && command.type !== "pair.resume") return undefined;
  // The broker checks a message's user-id against its connection's user, so it names the
  // sender; a message without one names nobody, and nobody is allowed.
  const sender = delivery.message.properties.userId as string | undefined;
  if (sender !== undefined && config.operatorUsers.includes(sender)) return undefined;
  return {
    kind: "invalid",
    commandId: command.commandId,
    correlationId: command.correlationId,
    outcome: () => engine.reject(command, ResultCodes.notAuthorised, notAuthorisedReason),
  };
}

const notAuthorisedReason = "pair commands need a broker user listed in MATCHING_OPERATOR_USERS";
