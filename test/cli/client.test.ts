/**
 * The client commands against a real conductor, outbox and broker: a resting bid, a trade,
 * an empty book, a rejection (exit 6), a result read later, and the events printed; stop
 * orders, amend, cancel-all, and pair halt (authorised by the broker URL's user); and each
 * missing or refusing server named in one line with its exit code.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import amqp from "amqplib";
import { commandQueue } from "../../src/infra/amqp/topology";
import { freePorts } from "../../src/stack/process";
import {
  type ConductorProcess,
  disposeAll,
  partitionCount,
  startConductor,
} from "../conductor/helpers";
import { type OutboxProcess, startOutbox, startTcpProxy } from "../outbox/helpers";
import { eventually } from "../support/eventually";
import { runToEnd } from "../support/run-to-end";
import {
  matchdCommand,
  stackStartTimeoutMs,
  type TestStack,
  testStack,
  uniquePartition,
} from "../support/stack";

let stack: TestStack;
let conductor: ConductorProcess;
let outbox: OutboxProcess;
/** Owned by this file's partition: pairId mod 1024 = the partition. */
let pair: number;

function matchd(args: string[], env: Record<string, string> = {}) {
  return runToEnd([...matchdCommand, ...args], {
    env: {
      PATH: process.env.PATH,
      MATCHING_BROKER_URL: stack.brokerUrl,
      MATCHING_PARTITION_COUNT: String(partitionCount),
      ...env,
    },
    killAfterMs: 30_000,
  });
}

/** `matchd order place` on a pair at a price and volume, with more flags and variables. */
function placeOrder(
  pair: number | string,
  side: "bid" | "ask",
  price: string,
  volume: string,
  more: string[] = [],
  env: Record<string, string> = {},
) {
  return matchd(
    [
      "order",
      "place",
      "--pair",
      String(pair),
      "--side",
      side,
      "--price",
      price,
      "--volume",
      volume,
      ...more,
    ],
    env,
  );
}

beforeAll(async () => {
  stack = await testStack();
  pair = uniquePartition();
  conductor = await startConductor(stack, pair);
  outbox = await startOutbox(stack, pair);
}, stackStartTimeoutMs);

afterAll(async () => {
  await outbox?.stop();
  await disposeAll();
});

describe("client commands", () => {
  test("a bid rests, an ask trades with it, the book ends empty, and events show it", async () => {
    const events = Bun.spawn([...matchdCommand, "events", "--follow", "--pair", String(pair)], {
      env: { PATH: process.env.PATH, MATCHING_BROKER_URL: stack.brokerUrl },
      stdout: "pipe",
      stderr: "pipe",
    });
    let printed = "";
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of events.stdout) printed += decoder.decode(chunk);
    })();
    // Its queue is bound once it has started: give it the moment a first try would.
    await Bun.sleep(1500);
    const url = ["--conductor-url", conductor.url];
    const bid = await placeOrder(pair, "bid", "100", "1.5", ["--user", "alice"]);
    expect(bid.stderr).toBe("");
    expect(bid.code).toBe(0);
    expect(bid.stdout).toMatch(
      /^accepted rested \(100\), order [0-9a-f-]{36}, executed 0, remaining 1\.5, 1 event, command /,
    );
    const resting = await matchd(["book", String(pair), ...url]);
    expect(resting.code).toBe(0);
    expect(resting.stdout).toMatch(/bid\s+100\s+1\.5\s+1\n/);
    const ask = await placeOrder(pair, "ask", "100", "1.5", ["--user", "bob", "--json"]);
    expect(ask.code).toBe(0);
    expect(JSON.parse(ask.stdout)).toMatchObject({
      status: "accepted",
      codeName: "filled",
      executedVolume: "1.5",
      events: 3,
    });
    const empty = await matchd(["book", String(pair), ...url]);
    expect(empty.stdout).toBe(`pair ${pair}: empty book\n`);
    await eventually("four events printed", () => printed.split("\n").length > 4);
    events.kill("SIGTERM");
    expect(await events.exited).toBe(0);
    const lines = printed.trim().split("\n");
    expect(lines.map((line) => line.split(" ")[1])).toEqual([
      "order.rested.v1",
      "order.filled.v1",
      "order.filled.v1",
      "deal.executed.v1",
    ]);
    expect(lines[0]).toMatch(
      new RegExp(
        `^\\d+-0 order\\.rested\\.v1 pair ${pair} order \\S+ bid 1\\.5 @ 100 rests \\(user alice\\)$`,
      ),
    );
    expect(lines[3]).toContain("deal 1.5 @ 100: maker");
  }, 60_000);

  test("events without --follow ends by itself once no event came for 2 s", async () => {
    const started = Date.now();
    const quiet = await matchd(["events", "--pair", String(pair)]);
    const elapsedMs = Date.now() - started;
    expect(quiet.code).toBe(0);
    expect(quiet.stdout).toBe("");
    expect(elapsedMs).toBeGreaterThanOrEqual(2000);
  }, 30_000);

  test("a rejected command exits 6 naming its result code and reason", async () => {
    await placeOrder(pair, "bid", "100", "1");
    const postOnly = await placeOrder(pair, "ask", "99", "1", ["--post-only"]);
    expect(postOnly.code).toBe(6);
    expect(postOnly.stdout).toBe("");
    expect(postOnly.stderr).toMatch(/^matchd: rejected post-only-would-take \(300\): .+\n$/);
    const cancel = await matchd(["order", "cancel", "no-such-order", "--pair", String(pair)]);
    expect(cancel.code).toBe(6);
    expect(cancel.stderr).toContain("rejected unknown-order (301)");
    const precision = await placeOrder(pair, "bid", "100.123", "1");
    expect(precision.code).toBe(6);
    expect(precision.stderr).toContain("precision-exceeded (203)");
  }, 60_000);

  test("--no-wait prints the command id; result shows its durable outcome later", async () => {
    const sent = await placeOrder(pair, "bid", "98", "2", ["--no-wait"]);
    expect(sent.code).toBe(0);
    const commandId = sent.stdout.trim();
    expect(commandId).toMatch(/^[0-9a-f-]{36}$/);
    let result = { code: -1, stdout: "", stderr: "" };
    await eventually("the stored result", async () => {
      result = await matchd(["result", commandId, "--conductor-url", conductor.url]);
      return result.code === 0;
    });
    expect(result.stdout).toContain(`accepted rested (100)`);
    expect(result.stdout).toContain(`command ${commandId}`);
    const unknown = await matchd([
      "result",
      "00000000-0000-4000-8000-000000000000",
      "--conductor-url",
      conductor.url,
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^matchd: no stored result for command 0{8}-.+\n$/);
  }, 60_000);

  test("a partition with no conductor: place waits its timeout and says so", async () => {
    const idle = uniquePartition();
    const started = Date.now();
    const placed = await placeOrder(idle, "bid", "1", "1", ["--timeout-ms", "1000"]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(placed.code).toBe(1);
    expect(placed.stderr).toMatch(
      new RegExp(
        `^matchd: no result within 1000 ms: no conductor consumes ${commandQueue(idle).replace(".", "\\.")} .+\n$`,
      ),
    );
    const connection = await amqp.connect(stack.brokerUrl);
    const channel = await connection.createChannel();
    await channel.deleteQueue(commandQueue(idle));
    await connection.close();
  }, 60_000);

  test("a command no queue takes is reported, never printed as sent", async () => {
    // A queue of another kind, unbound: the client's declaration fails (406) and it uses the
    // queue as it is, which the command exchange does not route to.
    const idle = uniquePartition();
    const connection = await amqp.connect(stack.brokerUrl);
    const channel = await connection.createChannel();
    await channel.assertQueue(commandQueue(idle), { arguments: { "x-queue-type": "classic" } });
    try {
      const sent = await placeOrder(idle, "bid", "1", "1", ["--no-wait"]);
      expect(sent.code).toBe(1);
      expect(sent.stdout).toBe("");
      expect(sent.stderr).toBe(
        `matchd: no queue took the command: is ${commandQueue(idle)} bound to matching:commands?\n`,
      );
    } finally {
      await channel.deleteQueue(commandQueue(idle));
      await connection.close();
    }
  }, 60_000);

  test("a broker connection lost while waiting for the result ends the wait in one line", async () => {
    const proxy = await startTcpProxy(stack.brokerUrl);
    const idle = uniquePartition(); // no conductor: the result would never come
    try {
      const waiting = matchd(
        [
          "order",
          "place",
          "--pair",
          String(idle),
          "--side",
          "bid",
          "--price",
          "1",
          "--volume",
          "1",
        ],
        { MATCHING_BROKER_URL: proxy.url },
      );
      await Bun.sleep(1500);
      proxy.outage(60_000);
      const ended = await waiting;
      expect(ended.code).toBe(1);
      expect(ended.stderr).toMatch(
        /^matchd: the broker closed the connection before the result came; `\.\/matchd result [0-9a-f-]{36}` tells whether the command was processed\n$/,
      );
    } finally {
      await proxy.close();
      const connection = await amqp.connect(stack.brokerUrl);
      await (await connection.createChannel()).deleteQueue(commandQueue(idle));
      await connection.close();
    }
  }, 60_000);

  test("servers that are not there, or refuse, get one line and their exit code", async () => {
    const [closed] = await freePorts(1);
    const book = await matchd(["book", "1", "--conductor-url", `http://127.0.0.1:${closed}`]);
    expect(book.code).toBe(1);
    expect(book.stderr).toMatch(
      new RegExp(`^matchd: no conductor answers at http://127\\.0\\.0\\.1:${closed} .+\n$`),
    );
    const noBroker = await matchd(
      ["order", "place", "--pair", "1", "--side", "bid", "--price", "1", "--volume", "1"],
      {
        MATCHING_BROKER_URL: `amqp://guest:guest@127.0.0.1:${closed}/matchd`,
      },
    );
    expect(noBroker.code).toBe(1);
    expect(noBroker.stderr).toMatch(
      /^matchd: no broker answers at amqp:\/\/guest:\*\*\*@127\.0\.0\.1:\d+\/matchd \(connect ECONNREFUSED.+\n$/,
    );
    const url = new URL(stack.brokerUrl);
    url.password = "wrong-password";
    const refused = await matchd(["events"], { MATCHING_BROKER_URL: url.toString() });
    expect(refused.code).toBe(5);
    expect(refused.stderr).toMatch(
      /^matchd: the broker at .+ refused the credentials of user guest .+\n$/,
    );
    expect(refused.stderr).not.toContain("wrong-password");
    const vhost = new URL(stack.brokerUrl);
    vhost.pathname = "/no-such-vhost";
    const missing = await matchd(["order", "cancel", "x", "--pair", "1"], {
      MATCHING_BROKER_URL: vhost.toString(),
    });
    expect(missing.code).toBe(5);
    expect(missing.stderr).toContain('refused vhost "no-such-vhost": it does not exist');
  }, 60_000);

  test("a stop order, its amend and a cancel-all; the book shows the stop", async () => {
    const url = ["--conductor-url", conductor.url];
    const user = ["--user", "carol"];
    const stop = await matchd([
      "order",
      "place",
      "--pair",
      String(pair),
      "--side",
      "bid",
      "--type",
      "stop-limit",
      "--stop-price",
      "105",
      "--price",
      "106",
      "--volume",
      "1",
      "--json",
      ...user,
    ]);
    expect(stop.stderr).toBe("");
    const placed = JSON.parse(stop.stdout) as { orderId: string; codeName: string };
    expect(placed).toMatchObject({ status: "accepted", code: 106, codeName: "stop-accepted" });
    const amend = await matchd([
      "order",
      "amend",
      "--id",
      placed.orderId,
      "--pair",
      String(pair),
      "--stop-price",
      "104",
      ...user,
    ]);
    expect(amend.code).toBe(0);
    expect(amend.stdout).toMatch(/^accepted ok \(0\), order \S+, .*1 event, command /);
    const book = await matchd(["book", String(pair), ...url]);
    expect(book.stdout).toContain("  stop bid at 104: 1, 1 order\n");
    const order = await fetch(`${conductor.url}/orders/${placed.orderId}`);
    expect(await order.json()).toMatchObject({ kind: "stop", stopPrice: "104", userId: "carol" });
    const rest = await placeOrder(pair, "ask", "200", "1", user);
    expect(rest.code).toBe(0);
    const all = await matchd(["order", "cancel-all", "--pair", String(pair), "--json", ...user]);
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout)).toMatchObject({ code: 0, cancelledOrders: 2, events: 2 });
    const again = await matchd(["order", "cancel-all", "--pair", String(pair), ...user]);
    expect(again.stdout).toMatch(/^accepted ok \(0\), cancelled 0, 0 events, command /);
  }, 60_000);

  test("a gtd order from --expire-at expires; a switch from session cancel-after fires", async () => {
    const user = ["--user", "dave"];
    const place = (price: string, more: string[]) =>
      matchd([
        "order",
        "place",
        "--pair",
        String(pair),
        "--side",
        "bid",
        "--price",
        price,
        "--volume",
        "1",
        "--json",
        ...user,
        ...more,
      ]);
    const gtd = JSON.parse((await place("50", ["--expire-at", "+1500ms"])).stdout) as {
      orderId: string;
      code: number;
    };
    expect(gtd.code).toBe(100);
    const plain = JSON.parse((await place("51", [])).stdout) as { orderId: string };
    const armed = await matchd([
      "session",
      "cancel-after",
      "--pair",
      String(pair),
      "--timeout",
      "1s",
      "--json",
      ...user,
    ]);
    expect(armed.code).toBe(0);
    expect(JSON.parse(armed.stdout)).toMatchObject({ code: 0, codeName: "ok" });
    expect(JSON.parse(armed.stdout).triggerAt).toBeGreaterThan(Date.now() - 1000);
    const gone = async (id: string) =>
      (await fetch(`${conductor.url}/orders/${id}`)).status === 404;
    await eventually(
      "both orders went",
      async () => (await gone(gtd.orderId)) && (await gone(plain.orderId)),
      15_000,
    );
    const bad = await matchd([
      "session",
      "cancel-after",
      "--pair",
      String(pair),
      "--timeout",
      "10ms",
      ...user,
    ]);
    expect(bad.code).toBe(6);
    expect(bad.stderr).toContain("rejected bad-timeout (212)");
  }, 60_000);

  test("order oco places a take-profit and a stop; a fill of one cancels the other", async () => {
    const user = ["--user", "erin"];
    const list = await matchd([
      "order",
      "oco",
      "--pair",
      String(pair),
      "--side",
      "ask",
      "--volume",
      "1",
      "--price",
      "300",
      "--stop-price",
      "20",
      "--list-id",
      "erin-1",
      "--json",
      ...user,
    ]);
    expect(list.stderr).toBe("");
    expect(JSON.parse(list.stdout)).toMatchObject({
      code: 0,
      listId: "erin-1",
      legs: [
        { orderId: "erin-1-tp", codeName: "rested" },
        { orderId: "erin-1-sl", codeName: "stop-accepted" },
      ],
    });
    const take = await placeOrder(pair, "bid", "300", "0.5", ["--user", "frank"]);
    expect(take.code).toBe(0);
    expect((await fetch(`${conductor.url}/orders/erin-1-sl`)).status).toBe(404);
    const tp = (await (await fetch(`${conductor.url}/orders/erin-1-tp`)).json()) as Record<
      string,
      unknown
    >;
    expect(tp).toMatchObject({ volume: "0.5" });
    expect(tp.linkedOrderId).toBeUndefined();
    await matchd(["order", "cancel", "erin-1-tp", "--pair", String(pair), ...user]);
  }, 60_000);

  test("pair halt is not-authorised unless the conductor lists the broker URL's user", async () => {
    const refused = await matchd(["pair", "halt", "--pair", String(pair), "--reason", "test"]);
    expect(refused.code).toBe(6);
    expect(refused.stderr).toContain("rejected not-authorised (308)");
    // A partition of its own, whose conductor lists the stack's broker user (guest).
    const operated = uniquePartition();
    const own = await startConductor(stack, operated, {
      env: { MATCHING_OPERATOR_USERS: new URL(stack.brokerUrl).username },
    });
    try {
      const halt = await matchd(["pair", "halt", "--pair", String(operated), "--reason", "test"]);
      expect(halt.stderr).toBe("");
      expect(halt.stdout).toMatch(/^accepted ok \(0\), 1 event, command /);
      const book = await matchd(["book", String(operated), "--conductor-url", own.url]);
      expect(book.stdout).toBe(`pair ${operated} is halted: test\npair ${operated}: empty book\n`);
      const place = await placeOrder(operated, "bid", "1", "1");
      expect(place.code).toBe(6);
      expect(place.stderr).toContain("rejected pair-halted (304)");
      const resume = await matchd(["pair", "resume", "--pair", String(operated), "--reason", "ok"]);
      expect(resume.code).toBe(0);
      const again = await matchd(["pair", "resume", "--pair", String(operated), "--reason", "ok"]);
      expect(again.stderr).toContain("rejected pair-not-halted (307)");
    } finally {
      await own.stop();
      const connection = await amqp.connect(stack.brokerUrl);
      await (await connection.createChannel()).deleteQueue(commandQueue(operated));
      await connection.close();
    }
  }, 60_000);

  test("stop, amend, cancel-all and pair flags are checked before anything is sent", async () => {
    const order = (args: string[]) => matchd(["order", ...args, "--pair", String(pair)]);
    const noStopPrice = await order([
      "place",
      "--side",
      "bid",
      "--type",
      "stop-limit",
      "--price",
      "1",
      "--volume",
      "1",
    ]);
    expect(noStopPrice.code).toBe(2);
    expect(noStopPrice.stderr).toContain("--stop-price: a stop-limit order needs --stop-price");
    const limitStop = await order([
      "place",
      "--side",
      "bid",
      "--price",
      "1",
      "--volume",
      "1",
      "--stop-price",
      "2",
    ]);
    expect(limitStop.stderr).toContain(
      "--stop-price: only stop-limit and stop-market orders take --stop-price",
    );
    const marketPrice = await order([
      "place",
      "--side",
      "bid",
      "--type",
      "stop-market",
      "--stop-price",
      "2",
      "--price",
      "1",
      "--volume",
      "1",
    ]);
    expect(marketPrice.stderr).toContain("--price: a stop-market order takes no --price");
    const bare = await order(["amend", "--id", "x"]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain(
      "an amend needs --volume (the new total), --price or --stop-price",
    );
    const noUser = await order(["cancel-all"]);
    expect(noUser.stderr).toContain("--user: required");
    const both = await order(["cancel-all", "--user", "u", "--partition", "3"]);
    expect(both.stderr).toContain(
      "--partition: names the partition of a cancel-all without --pair",
    );
    const noReason = await matchd(["pair", "halt", "--pair", "1"]);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain("--reason: required");
    const unknown = await matchd(["pair", "freeze"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("matchd: pair needs halt or resume");
    const orderUnknown = await matchd(["order", "replace"]);
    expect(orderUnknown.stderr).toContain(
      "matchd: order needs place, oco, cancel, amend or cancel-all",
    );
    const help = await matchd(["pair", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: matchd pair halt --pair P --reason TEXT");
  }, 60_000);

  test("bad flags are listed together, with a did-you-mean, and nothing is sent", async () => {
    const bad = await matchd([
      "order",
      "place",
      "--pair",
      "0",
      "--sid",
      "bid",
      "--price",
      "1e3",
      "--window",
      "5",
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("nothing sent");
    expect(bad.stderr).toContain("unknown flag --sid (did you mean --side?)");
    expect(bad.stderr).toContain("--window does not apply to order place");
    expect(bad.stderr).toContain("--pair: ");
    expect(bad.stderr).toContain("--side: required");
    expect(bad.stderr).toContain('--price: not a plain decimal such as 100 or 0.5 (got "1e3")');
    const book = await matchd(["book", "x"]);
    expect(book.code).toBe(2);
    expect(book.stderr).toContain('PAIR: not a positive integer (got "x")');
    const help = await matchd(["order", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--price-decimals N   the pair's price precision [default 2]");
  });
});
