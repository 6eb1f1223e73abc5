/**
 * A batch's net change to the datastore: each resting order's and stop's last state, each
 * pair's last halt or resume and each user's last dead-man's switch, from the engine's book
 * changes of every command in the batch.
 */
import type { BookChange, CommandEnvelope, RestingOrder, StopOrder } from "../domain/index";
import type { CommitBuilder } from "./commit-script";
import type { ConductorStore } from "./store";

/** The order a command names: a place's, a cancel's or an amend's, a list's first leg. */
export function commandOrderId(command: CommandEnvelope): string | undefined {
  switch (command.type) {
    case "order.place":
    case "order.cancel":
    case "order.amend":
      return command.payload.id;
    case "order.place-oco":
      return command.payload.legs[0]?.id;
    default:
      return undefined;
  }
}

/** The second order a command names: a one-cancels-other list's other leg. */
export function secondOrderId(command: CommandEnvelope): string | undefined {
  return command.type === "order.place-oco" ? command.payload.legs[1]?.id : undefined;
}

interface OrderNet {
  /** The order's last change in the batch. */
  change: { op: "put" | "remove"; order: RestingOrder };
  /** Accepted by a command of this batch: nothing of it was stored before. */
  created: boolean;
  /** It rested at some point of the batch (its pair must be recorded). */
  rested: boolean;
  /** Its sequence as stored before the batch (its book member's prefix). */
  storedSequence: number;
}

interface StopNet {
  change: { op: "stop-put" | "stop-remove"; stop: StopOrder };
  created: boolean;
  armed: boolean;
}

/**
 * The net change of a batch: each resting order's and stop's last state, and each pair's
 * last halt or resume. The commit is atomic, so the states passed through inside the batch
 * are never visible. An order that rested and left the book within the batch writes nothing
 * but its pair (as if committed alone); so does a stop armed and triggered within it.
 */
export class NetChanges {
  private readonly orders = new Map<string, OrderNet>();
  private readonly stops = new Map<string, StopNet>();
  private readonly halts = new Map<number, { halted: boolean; reason: string }>();
  /** Dead-man's switches and sweeps by user id: the last deadline, or undefined (removed). */
  private readonly switches = new Map<string, number | undefined>();
  private readonly sweeps = new Map<string, number | undefined>();

  /**
   * `acceptedOrderId`: the order its command accepted. `amended`: an amended order's state
   * before its command, which is what was stored when the order's first change in the batch
   * is that command's.
   */
  add(
    change: BookChange,
    acceptedOrderId: string | undefined,
    amended?: RestingOrder,
    alsoAccepted?: string,
  ): void {
    switch (change.op) {
      case "put":
      case "remove": {
        const order = change.order;
        const prior = this.orders.get(order.id);
        if (prior === undefined) {
          const before = amended?.id === order.id ? amended : order;
          this.orders.set(order.id, {
            change,
            // Accepted by this very command: it cannot have rested before this batch.
            created: acceptedOrderId === order.id || alsoAccepted === order.id,
            rested: change.op === "put",
            // A fill or a cancel keeps the sequence, so the change's is the stored one.
            storedSequence: before.sequence,
          });
        } else {
          prior.change = change;
          if (change.op === "put") prior.rested = true;
        }
        return;
      }
      case "stop-put":
      case "stop-remove": {
        const stop = change.stop;
        const prior = this.stops.get(stop.id);
        if (prior === undefined) {
          this.stops.set(stop.id, {
            change,
            created: acceptedOrderId === stop.id || alsoAccepted === stop.id,
            armed: change.op === "stop-put",
          });
        } else {
          prior.change = change;
          if (change.op === "stop-put") prior.armed = true;
        }
        return;
      }
      case "halt":
        this.halts.set(change.pairId, { halted: true, reason: change.reason });
        return;
      case "resume":
        this.halts.set(change.pairId, { halted: false, reason: "" });
        return;
      case "switch-put":
      case "switch-remove":
        this.switches.set(change.userId, change.op === "switch-put" ? change.deadline : undefined);
        return;
      case "sweep-put":
      case "sweep-remove":
        this.sweeps.set(change.userId, change.op === "sweep-put" ? change.deadline : undefined);
        return;
    }
  }

  stage(store: ConductorStore, batch: CommitBuilder): void {
    const pairs = new Set<number>();
    for (const { change, created, rested, storedSequence } of this.orders.values()) {
      const order = change.order;
      if (change.op === "put") store.stageRestingOrder(batch, order);
      else if (!created) store.stageRemovedOrder(batch, order);
      if (!created && storedSequence !== order.sequence) {
        store.stageStaleMember(batch, order, storedSequence);
      }
      if (rested) pairs.add(order.pairId);
    }
    for (const { change, created, armed } of this.stops.values()) {
      if (change.op === "stop-put") store.stageStopOrder(batch, change.stop);
      else if (!created) store.stageRemovedStop(batch, change.stop);
      if (armed) pairs.add(change.stop.pairId);
    }
    for (const pairId of pairs) store.stagePair(batch, pairId);
    for (const [pairId, { halted, reason }] of this.halts) {
      if (halted) store.stageHalt(batch, pairId, reason);
      else store.stageResume(batch, pairId);
    }
    for (const [userId, deadline] of this.switches)
      store.stageSession(batch, false, userId, deadline);
    for (const [userId, deadline] of this.sweeps) store.stageSession(batch, true, userId, deadline);
  }
}
