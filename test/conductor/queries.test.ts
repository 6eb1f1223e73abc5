/**
 * The conductor's query routes in-process, over a real engine and a stub store (the fault):
 * strict number parsing, no internal error text in answers, and a digest that is computed
 * once per state of the books, not once per request.
 */
import { expect, spyOn, test } from "bun:test";
import { Hono } from "hono";
import { queryRoutes } from "../../src/conductor/queries";
import type { ConductorStore } from "../../src/conductor/store";
import { MatchingEngine } from "../../src/domain/index";
import { place } from "../domain/helpers";

function app(engine: MatchingEngine, store: Partial<ConductorStore> = {}) {
  const hono = new Hono();
  queryRoutes(engine, store as ConductorStore, () => true)(hono);
  return hono;
}

test("book queries take plain decimal integers only", async () => {
  const engine = new MatchingEngine();
  engine.apply(place({ id: "b1", pairId: 1000 }));
  const routes = app(engine);
  expect((await routes.request("/books/1000?depth=5")).status).toBe(200);
  for (const path of [
    "/books/1e3",
    "/books/1.0",
    "/books/%20%201",
    "/books/0x10",
    "/books/1000?depth=0x10",
    "/books/1000?depth=1e2",
    "/books/1000?depth=",
    "/books/1000?depth=1001",
  ]) {
    expect({ path, status: (await routes.request(path)).status }).toEqual({ path, status: 400 });
  }
});

test("a datastore failure is answered without its internal text", async () => {
  const routes = app(new MatchingEngine(), {
    storedResult: async () => {
      throw new Error("connect ECONNREFUSED 10.1.2.3:6379");
    },
  });
  const response = await routes.request("/commands/c1");
  expect(response.status).toBe(503);
  expect(await response.text()).not.toContain("10.1.2.3");
});

test("the digest is computed once per state of the books", async () => {
  const engine = new MatchingEngine();
  const computed = spyOn(engine as unknown as { computeDigest(): string }, "computeDigest");
  const routes = app(engine);
  const digestOf = async () =>
    ((await (await routes.request("/digest")).json()) as { digest: string }).digest;
  const empty = await digestOf();
  expect(await digestOf()).toBe(empty);
  expect(computed).toHaveBeenCalledTimes(1);
  engine.apply(place({ id: "b1" }));
  const one = await digestOf();
  expect(one).not.toBe(empty);
  expect(await digestOf()).toBe(one);
  expect(computed).toHaveBeenCalledTimes(2);
  engine.clear();
  expect(await digestOf()).toBe(empty);
  expect(computed).toHaveBeenCalledTimes(3);
});
