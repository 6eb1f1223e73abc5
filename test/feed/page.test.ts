/**
 * The feed's live page in a real headless Chromium, driven over the DevTools protocol: it
 * shows orders placed with `matchd order place`, then updates by itself after a trade (the
 * ladder, the trades, the sequence number, the checksum check), and a screenshot is taken.
 */

import { afterAll, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePorts } from "../../src/stack/process";
import { conductorSuite, partitionCount, startConductor } from "../conductor/helpers";
import { eventually, startOutbox } from "../outbox/helpers";
import { matchdCommand, uniquePartition } from "../support/stack";
import { tempDir } from "../support/temp-dir";
import { startFeed } from "./helpers";

const chromium = "/usr/bin/chromium";
const suite = conductorSuite();
const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** One DevTools session on the page Chromium opened. */
class Page {
  private nextId = 1;
  private readonly waiting = new Map<number, (result: Record<string, unknown>) => void>();
  private constructor(private readonly ws: WebSocket) {
    ws.onmessage = (event) => {
      const m = JSON.parse(String(event.data)) as { id?: number; result?: Record<string, unknown> };
      if (m.id !== undefined) this.waiting.get(m.id)?.(m.result ?? {});
    };
  }

  static async open(port: number): Promise<Page> {
    let target: { type: string; webSocketDebuggerUrl: string } | undefined;
    await eventually("Chromium's page target", async () => {
      const list = (await fetch(`http://127.0.0.1:${port}/json/list`).then(
        (r) => r.json(),
        () => [],
      )) as { type: string; webSocketDebuggerUrl: string }[];
      target = list.find((t) => t.type === "page");
      return target !== undefined;
    });
    const ws = new WebSocket(target!.webSocketDebuggerUrl);
    await new Promise((resolve) => {
      ws.onopen = resolve;
    });
    return new Page(ws);
  }

  send(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve) => this.waiting.set(id, resolve));
  }

  async text(selector: string): Promise<string> {
    const { result } = await this.send("Runtime.evaluate", {
      expression: `document.querySelector(${JSON.stringify(selector)})?.innerText ?? ""`,
      returnByValue: true,
    });
    return String((result as { value?: unknown }).value ?? "");
  }

  close(): void {
    this.ws.close();
  }
}

function placeOrder(
  brokerUrl: string,
  pairId: number,
  side: string,
  price: string,
  volume: string,
) {
  const run = Bun.spawnSync(
    [
      ...matchdCommand,
      "order",
      "place",
      "--pair",
      String(pairId),
      "--side",
      side,
      "--price",
      price,
      "--volume",
      volume,
    ],
    {
      env: {
        PATH: process.env.PATH ?? "",
        MATCHING_BROKER_URL: brokerUrl,
        MATCHING_PARTITION_COUNT: String(partitionCount),
      },
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  expect(run.exitCode).toBe(0);
}

test("the live page shows placed orders, then a trade as it happens", async () => {
  // Absent Chromium is a failure, not a skip: a skipped render check looks like a pass.
  expect(existsSync(chromium)).toBe(true);
  const partition = uniquePartition();
  const pairId = partition;
  const conductor = await startConductor(suite.stack, partition);
  const outbox = await startOutbox(suite.stack, partition);
  const feed = await startFeed(suite.stack, partition);
  cleanups.push(
    () => conductor.dispose(),
    () => outbox.stop(),
    () => feed.dispose(),
  );
  const { brokerUrl } = suite.stack;
  placeOrder(brokerUrl, pairId, "bid", "100", "1");
  placeOrder(brokerUrl, pairId, "bid", "99.5", "2");
  placeOrder(brokerUrl, pairId, "ask", "101", "3");

  const dir = tempDir("matchd-feed-page-");
  const port = (await freePorts(1))[0]!;
  const browser = Bun.spawn(
    [
      chromium,
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      `--user-data-dir=${join(dir, "profile")}`,
      `--remote-debugging-port=${port}`,
      "--window-size=1000,700",
      `${feed.url}/?pair=${pairId}`,
    ],
    { stdout: "ignore", stderr: "ignore" },
  );
  cleanups.push(async () => {
    browser.kill("SIGKILL");
    await browser.exited;
  });
  const page = await Page.open(port);
  cleanups.push(() => page.close());
  await eventually("the ladder with the three orders", async () => {
    const ladder = await page.text("#ladder tbody");
    return ladder.includes("101") && ladder.includes("99.5") && ladder.includes("100");
  });
  expect(await page.text("#conn")).toBe("connected");
  expect(await page.text("#check")).toBe("checksum ok");
  const seqBefore = await page.text("#seq");

  // An ask that takes the best bid: the page updates without a reload.
  placeOrder(brokerUrl, pairId, "ask", "100", "1");
  await eventually("the trade on the page", async () =>
    (await page.text("#trades tbody")).includes("100"),
  );
  await eventually(
    "the bid at 100 gone",
    async () => !(await page.text("#ladder tbody")).includes("100\t"),
  );
  expect(await page.text("#seq")).not.toBe(seqBefore);
  expect(await page.text("#check")).toBe("checksum ok");

  const shot = await page.send("Page.captureScreenshot", { format: "png" });
  const png = Buffer.from(String(shot.data), "base64");
  expect(png.subarray(1, 4).toString()).toBe("PNG");
  expect(png.length).toBeGreaterThan(10_000);
  writeFileSync(join(dir, "page.png"), png);
  if (process.env.MATCHD_KEEP_PAGE_SCREENSHOT)
    writeFileSync(process.env.MATCHD_KEEP_PAGE_SCREENSHOT, png);
}, 120_000);
