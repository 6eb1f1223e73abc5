/**
 * Results, books and events as a person reads them: one line a result or an event, and a
 * depth ladder for a book (asks above the spread, highest first; bids below it), with its
 * halt above and its stop levels below.
 */
import type { CommandResult, Depth, EventEnvelope } from "../../domain/index";

export function resultLine(result: CommandResult): string {
  const head = `${result.status} ${result.codeName} (${result.code})`;
  if (result.status === "rejected") return `${head}: ${result.reason ?? "no reason given"}`;
  const parts = [head];
  if (result.orderId !== undefined) parts.push(`order ${result.orderId}`);
  if (result.executedVolume !== undefined) parts.push(`executed ${result.executedVolume}`);
  if (result.remainingVolume !== undefined) parts.push(`remaining ${result.remainingVolume}`);
  if (result.cancelledOrders !== undefined) parts.push(`cancelled ${result.cancelledOrders}`);
  if (result.triggeredStops !== undefined) parts.push(`triggered ${result.triggeredStops} stops`);
  if (result.reason !== undefined) parts.push(result.reason);
  parts.push(`${result.events} event${result.events === 1 ? "" : "s"}`);
  parts.push(`command ${result.commandId}`);
  return parts.join(", ");
}

/** GET /books' answer: the depth, and (a conductor that knows them) stop levels and the halt. */
export interface BookView extends Depth {
  stops?: {
    side: string;
    stopPrice: string;
    volume: string;
    quoteVolume: string;
    orders: number;
  }[];
  halted?: boolean;
  haltReason?: string;
}

export function bookLadder(pairId: number, book: BookView): string {
  const halt = book.halted === true ? `pair ${pairId} is halted: ${book.haltReason ?? ""}\n` : "";
  const stops = (book.stops ?? []).map(
    (level) =>
      `  stop ${level.side} at ${level.stopPrice}: ${level.quoteVolume === "0" ? level.volume : `${level.volume} (quote ${level.quoteVolume})`}, ${level.orders} order${level.orders === 1 ? "" : "s"}\n`,
  );
  return halt + depthLadder(pairId, book) + stops.join("");
}

function depthLadder(pairId: number, depth: Depth): string {
  if (depth.asks.length === 0 && depth.bids.length === 0) return `pair ${pairId}: empty book\n`;
  const rows = [
    ...[...depth.asks].reverse().map((level) => ["ask", level.price, level.volume, level.orders]),
    null,
    ...depth.bids.map((level) => ["bid", level.price, level.volume, level.orders]),
  ];
  const cells = rows.filter((row) => row !== null).map((row) => row.map(String));
  const widths = [3, 5, 6, 6].map((min, i) => Math.max(min, ...cells.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    `  ${row[0]!.padEnd(widths[0]!)}  ${row[1]!.padStart(widths[1]!)}  ${row[2]!.padStart(widths[2]!)}  ${row[3]!.padStart(widths[3]!)}`;
  const out = [`pair ${pairId}`, line(["", "price", "volume", "orders"])];
  for (const row of rows) {
    out.push(
      row === null
        ? `  ${"-".repeat(widths.reduce((a, b) => a + b + 2, -2))} spread`
        : line(row.map(String)),
    );
  }
  return `${out.join("\n")}\n`;
}

/** One event as a line: stream offset, type, pair, then what the event says. */
export function eventLine(event: EventEnvelope, offset: string | undefined): string {
  const p = event.payload as Record<string, unknown>;
  const text = (key: string) => String(p[key] ?? "?");
  let what: string;
  switch (event.type) {
    case "order.rested.v1":
      what = `order ${text("orderId")} ${text("side")} ${text("volume")} @ ${text("price")} rests (user ${text("userId")})`;
      break;
    case "order.filled.v1":
    case "order.updated.v1":
      what = `order ${text("orderId")} ${text("side")} ${text("role")} ${text("fillVolume")} @ ${text("fillPrice")}, remaining ${text("volume")}`;
      break;
    case "order.cancelled.v1":
      what = `order ${text("orderId")} ${text("side")} cancelled (${text("reason")}), remaining ${text("volume")}`;
      break;
    case "order.expired.v1":
      what = `order ${text("orderId")} ${text("side")} expired at ${text("expireAt")}, remaining ${text("volume")}`;
      break;
    case "deal.executed.v1":
      what = `deal ${text("volume")} @ ${text("price")}: maker ${text("makerOrderId")} (${text("makerSide")}), taker ${text("takerOrderId")} (${text("takerSide")})`;
      break;
    case "order.rejected.v1":
      what = `order ${text("orderId")} rejected: ${text("codeName")}: ${text("reason")}`;
      break;
    case "order.stop-accepted.v1":
      what = `order ${text("orderId")} ${text("side")} ${text("type")} ${text("volume")} @ ${text("price")} waits for ${text("stopPrice")} (user ${text("userId")})`;
      break;
    case "order.triggered.v1":
      what = `order ${text("orderId")} ${text("side")} ${text("type")} triggered at ${text("triggerPrice")} (stop ${text("stopPrice")})`;
      break;
    case "order.amended.v1": {
      const terms = (key: string) => {
        const t = (p[key] ?? {}) as Record<string, unknown>;
        return `${String(t.volume ?? "?")} @ ${String(t.price ?? "?")}`;
      };
      what = `order ${text("orderId")} ${text("side")} amended ${terms("before")} -> ${terms("after")}${p.priorityKept === true ? ", priority kept" : ""}`;
      break;
    }
    case "pair.halted.v1":
    case "pair.resumed.v1":
      what = `${event.type === "pair.halted.v1" ? "halted" : "resumed"}: ${text("reason")}`;
      break;
    default:
      what = JSON.stringify(p);
  }
  return `${offset ?? "-"} ${event.type} pair ${event.pairId} ${what}`;
}
