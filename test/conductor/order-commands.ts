/**
 * Builders of every command type for one partition's pair (docs/orders.md), so a conductor
 * test states only the fields it cares about, and a seeded scenario that walks through stop
 * orders and their triggers, amends, cancel-alls, halts and resumes.
 */
import { mulberry32 } from "../../bench/workloads";
import type {
  AmendOrderPayload,
  CommandEnvelope,
  PlaceOrderPayload,
  Side,
} from "../../src/domain/index";

const epochMs = 1_767_225_600_000;

/** Commands for `pairId` (by default the partition's own pair, pairId = partition). */
export class OrderCommands {
  private n = 0;

  constructor(
    readonly partition: number,
    readonly pairId = partition,
    /** Makes command and order ids unique across tests sharing a partition number. */
    readonly tag = `p${partition}-${Math.random().toString(36).slice(2, 8)}`,
  ) {}

  private envelope<T extends CommandEnvelope["type"]>(type: T, payload: object) {
    this.n++;
    return {
      schemaVersion: 1 as const,
      commandId: `${this.tag}-c${this.n}`,
      correlationId: `${this.tag}-corr${this.n}`,
      type,
      submittedAt: new Date(epochMs + this.n).toISOString(),
      pairId: this.pairId,
      partition: this.partition,
      payload,
    } as unknown as CommandEnvelope;
  }

  /** An order id of this builder's tag. */
  id(name: string): string {
    return `${this.tag}-${name}`;
  }

  /** A limit order unless `type` says otherwise; precisions 2, 8, 8. */
  place(
    name: string,
    side: Side,
    price: string,
    volume: string,
    more: Partial<PlaceOrderPayload> = {},
  ): CommandEnvelope {
    const payload: PlaceOrderPayload = {
      id: this.id(name),
      userId: "maker",
      side,
      type: "limit",
      pairId: this.pairId,
      timestamp: epochMs + this.n,
      price,
      volume,
      volumeTotal: volume,
      quoteVolume: "0",
      priceDecimals: 2,
      amountDecimals: 8,
      quoteDecimals: 8,
      ...more,
    };
    return this.envelope("order.place", payload);
  }

  stopLimit(
    name: string,
    side: Side,
    stopPrice: string,
    price: string,
    volume: string,
    more: Partial<PlaceOrderPayload> = {},
  ): CommandEnvelope {
    return this.place(name, side, price, volume, { type: "stop-limit", stopPrice, ...more });
  }

  stopMarket(name: string, side: Side, stopPrice: string, volume: string): CommandEnvelope {
    return this.place(name, side, "0", volume, { type: "stop-market", stopPrice });
  }

  amend(
    name: string,
    fields: Omit<AmendOrderPayload, "id" | "userId" | "pairId">,
    userId = "maker",
  ): CommandEnvelope {
    return this.envelope("order.amend", {
      id: this.id(name),
      userId,
      pairId: this.pairId,
      ...fields,
    });
  }

  cancel(name: string, userId = "maker"): CommandEnvelope {
    return this.envelope("order.cancel", { id: this.id(name), userId, pairId: this.pairId });
  }

  cancelAll(userId: string, onePair = true): CommandEnvelope {
    return this.envelope(
      "order.cancel-all",
      onePair ? { userId, pairId: this.pairId } : { userId },
    );
  }

  /** A one-cancels-other list of two legs, each as place() would make it (user "maker"). */
  oco(listName: string, legs: CommandEnvelope[]): CommandEnvelope {
    const payloads = legs.map((leg) => leg.payload as PlaceOrderPayload);
    return this.envelope("order.place-oco", {
      listId: this.id(listName),
      userId: payloads[0]!.userId,
      pairId: this.pairId,
      legs: payloads,
    });
  }

  /** The dead-man's switch of `userId` (0 disarms). */
  cancelAfter(userId: string, timeoutMs: number): CommandEnvelope {
    return this.envelope("session.cancel-after", { userId, timeoutMs });
  }

  halt(reason = "maintenance"): CommandEnvelope {
    return this.envelope("pair.halt", { pairId: this.pairId, reason });
  }

  resume(reason = "done"): CommandEnvelope {
    return this.envelope("pair.resume", { pairId: this.pairId, reason });
  }
}

/**
 * A fixed walk through the new commands, then `randomTail` seeded commands of every type:
 * stops that trigger in a cascade, an amend that loses its priority (a new book member), one
 * that re-matches and fills, a cancel-all, a halt with its refusals, and a resume.
 */
export function scenario(b: OrderCommands, seed: number, randomTail: number): CommandEnvelope[] {
  const c: CommandEnvelope[] = [
    b.place("a101", "ask", "101", "0.5"),
    b.place("a102", "ask", "102", "2"),
    b.place("a103", "ask", "103", "1"),
    b.place("b99", "bid", "99", "1"),
    b.place("b98", "bid", "98", "1", { userId: "bidder" }),
    b.place("b97", "bid", "97", "1", { userId: "bidder", postOnly: true }),
    b.stopLimit("s-buy", "bid", "101", "102", "1", { userId: "stopper" }),
    b.stopMarket("s-buy-m", "bid", "102", "0.5"),
    b.stopLimit("s-sell", "ask", "96", "95", "1", { userId: "stopper" }),
    // Trades at 101 and triggers s-buy, whose trades at 102 trigger s-buy-m: a cascade.
    b.place("t1", "bid", "101", "0.25", { userId: "taker" }),
    // Priority lost: a new sequence, so a new book member.
    b.amend("b98", { price: "97.5" }, "bidder"),
    // Priority kept: the volume shrinks.
    b.amend("b99", { volume: "0.5" }),
    // Re-matched at once: crosses the best ask and fills completely.
    b.amend("b99", { price: "103" }),
    b.amend("s-sell", { stopPrice: "95.5" }, "stopper"),
    b.cancelAll("bidder"),
    b.halt("maintenance"),
    b.place("refused", "bid", "90", "1"),
    b.amend("a103", { price: "104" }),
    b.cancel("a103"),
    b.resume("maintenance over"),
    b.place("b90", "bid", "90", "1"),
  ];
  const random = mulberry32(seed);
  const owners = new Map<string, string>();
  const users = ["u1", "u2", "u3"];
  const price = (around: number) => (around + Math.floor(random() * 600 - 300) / 100).toFixed(2);
  const volume = () => String(1 + Math.floor(random() * 9));
  let halted = false;
  for (let i = 0; i < randomTail; i++) {
    // A halt lasts a few commands: long enough for some to be refused, not for most.
    if (halted && random() < 0.2) {
      c.push(b.resume(`resume ${i}`));
      halted = false;
      continue;
    }
    const roll = random();
    const user = users[Math.floor(random() * users.length)]!;
    const side: Side = random() < 0.5 ? "bid" : "ask";
    const name = `r${i}`;
    // A recent order (most still rest or wait), by its owner mostly (else: not-owner).
    const names = [...owners.keys()].slice(-30);
    const target = names[Math.floor(random() * names.length)] ?? "none";
    const owner = random() < 0.9 ? (owners.get(target) ?? user) : user;
    if (roll < 0.4) {
      owners.set(name, user);
      c.push(b.place(name, side, price(100), volume(), { userId: user }));
    } else if (roll < 0.55) {
      owners.set(name, user);
      const stop = side === "bid" ? price(102) : price(98);
      c.push(
        random() < 0.5
          ? b.stopLimit(name, side, stop, price(100), "1", { userId: user })
          : b.place(name, side, "0", "1", { userId: user, type: "stop-market", stopPrice: stop }),
      );
    } else if (roll < 0.78) {
      const fields = random() < 0.5 ? { volume: volume() } : { price: price(100) };
      c.push(b.amend(target, fields, owner));
    } else if (roll < 0.93) {
      c.push(b.cancel(target, owner));
    } else if (roll < 0.96) {
      c.push(b.cancelAll(user, random() < 0.5));
    } else {
      // Now and then a halt of a halted pair, or a resume of a running one: refused.
      const again = random() < 0.2;
      c.push(halted !== again ? b.resume(`resume ${i}`) : b.halt(`halt ${i}`));
      if (!again) halted = !halted;
    }
  }
  return c;
}
