// Small builders for test commands so each test states only the fields it cares about.

import type {
  AmendOrderCommand,
  AmendOrderPayload,
  CancelAllCommand,
  CancelOrderCommand,
  ClockTickCommand,
  PairControlCommand,
  PlaceOrderCommand,
  PlaceOrderPayload,
} from "../../src/domain/index";

let counter = 0;

export function place(
  payload: Partial<PlaceOrderPayload> & { id: string },
  envelope: Partial<PlaceOrderCommand> = {},
): PlaceOrderCommand {
  counter++;
  const pairId = payload.pairId ?? envelope.pairId ?? 1;
  return {
    schemaVersion: 1,
    commandId: envelope.commandId ?? `cmd-${payload.id}-${counter}`,
    correlationId: `corr-${counter}`,
    type: "order.place",
    submittedAt: "2024-01-01T00:00:00.000Z",
    pairId: envelope.pairId ?? pairId,
    partition: 0,
    payload: {
      userId: "u1",
      side: "bid",
      type: "limit",
      pairId,
      timestamp: 1_704_067_200_000 + counter,
      price: "100",
      volume: "1",
      volumeTotal: payload.volume ?? "1",
      quoteVolume: "0",
      priceDecimals: 2,
      amountDecimals: 8,
      quoteDecimals: 8,
      ...payload,
    },
  };
}

export function cancel(id: string, userId = "u1", pairId = 1): CancelOrderCommand {
  counter++;
  return {
    schemaVersion: 1,
    commandId: `cancel-${id}-${counter}`,
    correlationId: `corr-${counter}`,
    type: "order.cancel",
    submittedAt: "2024-01-01T00:00:00.000Z",
    pairId,
    partition: 0,
    payload: { id, userId, pairId },
  };
}

function envelope(pairId: number, name: string) {
  counter++;
  return {
    schemaVersion: 1 as const,
    commandId: `${name}-${counter}`,
    correlationId: `corr-${counter}`,
    submittedAt: "2024-01-01T00:00:00.000Z",
    pairId,
    partition: 0,
  };
}

export function amend(
  id: string,
  changes: Partial<Pick<AmendOrderPayload, "volume" | "price" | "stopPrice">>,
  userId = "u1",
  pairId = 1,
): AmendOrderCommand {
  return {
    ...envelope(pairId, `amend-${id}`),
    type: "order.amend",
    payload: { id, userId, pairId, ...changes },
  };
}

export function cancelAll(userId: string, pairId?: number, envelopePairId = 1): CancelAllCommand {
  return {
    ...envelope(envelopePairId, `cancel-all-${userId}`),
    type: "order.cancel-all",
    payload: pairId === undefined ? { userId } : { userId, pairId },
  };
}

export function pairControl(
  type: "pair.halt" | "pair.resume",
  pairId = 1,
  reason = "maintenance",
): PairControlCommand {
  return { ...envelope(pairId, type), type, payload: { pairId, reason } };
}

/** The conductor's clock.tick at `now` (epoch milliseconds). */
export function tick(now: number, partition = 0): ClockTickCommand {
  counter++;
  return {
    schemaVersion: 1,
    commandId: `tick-${now}-${counter}`,
    correlationId: "",
    type: "clock.tick",
    submittedAt: new Date(now).toISOString(),
    pairId: 0,
    partition,
    payload: { now },
  };
}
