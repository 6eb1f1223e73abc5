/**
 * The stored form of a command's result under `processed-command:<commandId>`: a JSON array of
 * its fields in a fixed order, without what the key and the code already say (the command id,
 * the code's name, the status spelled out). It holds one result for every command of the dedup
 * window, so its size is most of the window's memory; a result written as a JSON object (by an
 * earlier version, still inside its window) is read as it was.
 *
 * A result with a `transactTime` stores it eighth, before `reason`: an array without a number
 * there (a string, null, or too short) was written before results carried the time, and is
 * read in that layout.
 */
import { resultCodeName } from "../domain/result-codes";
import type { CommandResult, OcoLegResult, OrderStatus } from "../domain/types";

const statuses = ["accepted", "rejected", "duplicate"] as const satisfies CommandResult["status"][];

/** The fields before the time, which every layout has. */
type Head = [
  code: number,
  status: number,
  orderId: string | null,
  orderStatus: OrderStatus | null,
  executedVolume: string | null,
  remainingVolume: string | null,
  events: number,
];

/** The fields after the time. */
type Tail = [
  reason: string | null,
  cancelledOrders: number | null,
  triggeredStops: number | null,
  /** Only when it is not the code's own name. */
  codeName: string | null,
  /** session.cancel-after's deadline. */
  triggerAt: number | null,
  /** order.place-oco's list and its legs' results. */
  listId: string | null,
  legs: OcoLegResult[] | null,
];

/** The layout without the time: what decode reads once it took the time out. */
type WithoutTime = [...Head, ...Tail];

/** The result as stored: the command id is the key's, the code's name is the table's. */
export function encodeStoredResult(result: CommandResult): string {
  const stored: WithoutTime = [
    result.code,
    statuses.indexOf(result.status),
    result.orderId ?? null,
    result.orderStatus ?? null,
    result.executedVolume ?? null,
    result.remainingVolume ?? null,
    result.events,
    result.reason ?? null,
    result.cancelledOrders ?? null,
    result.triggeredStops ?? null,
    result.codeName === resultCodeName(result.code) ? null : result.codeName,
    result.triggerAt ?? null,
    result.listId ?? null,
    result.legs ?? null,
  ];
  const timed: unknown[] = stored;
  if (result.transactTime !== undefined) timed.splice(7, 0, result.transactTime);
  let end = timed.length;
  while (end > 0 && timed[end - 1] === null) end--;
  return JSON.stringify(timed.slice(0, end));
}

/** The result a stored value holds, as the command produced it. */
export function decodeStoredResult(commandId: string, value: string): CommandResult {
  if (!value.startsWith("[")) return JSON.parse(value) as CommandResult;
  const array = JSON.parse(value) as unknown[];
  const transactTime = typeof array[7] === "number" ? (array.splice(7, 1)[0] as number) : undefined;
  const stored = array as Partial<WithoutTime>;
  const [code = 0, status = 0, orderId, orderStatus, executed, remaining, events = 0] = stored;
  const [, , , , , , , reason, cancelledOrders, triggeredStops, codeName] = stored;
  const [, , , , , , , , , , , triggerAt, listId, legs] = stored;
  const result: CommandResult = {
    commandId,
    status: statuses[status] ?? "rejected",
    code,
    codeName: codeName ?? resultCodeName(code),
    events,
  };
  if (reason != null) result.reason = reason;
  if (orderId != null) result.orderId = orderId;
  if (orderStatus != null) result.orderStatus = orderStatus;
  if (executed != null) result.executedVolume = executed;
  if (remaining != null) result.remainingVolume = remaining;
  if (cancelledOrders != null) result.cancelledOrders = cancelledOrders;
  if (triggeredStops != null) result.triggeredStops = triggeredStops;
  if (triggerAt != null) result.triggerAt = triggerAt;
  if (listId != null) result.listId = listId;
  if (legs != null) result.legs = legs;
  if (transactTime !== undefined) result.transactTime = transactTime;
  return result;
}

/** The stored value as the JSON a reply or `GET /commands/:id` carries. */
export function storedResultJson(commandId: string, value: string): string {
  return value.startsWith("[") ? JSON.stringify(decodeStoredResult(commandId, value)) : value;
}
