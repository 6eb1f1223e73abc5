/**
 * The conductor's query routes in-process, over a real engine and a stub store (the fault):
 * strict number parsing, no internal error text in answers, and a digest that is computed
 * once per state of the books, not once per request.
 */
import { expect, spyOn, test } from "bun:test";
import { Hono } from "hono";
import { digestStepOrders, queryRoutes } from "../../src/conductor/queries";
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

test("the digest is hashed in bounded steps, shared by concurrent requests, then only changes", async () => {
  const engine = new MatchingEngine();
  // Five levels of 500 orders: 2,500 orders, hashed at most digestStepOrders (1,000) a step.
  for (let level = 0; level < 5; level++) {
    for (let i = 0; i < 500; i++)
      engine.apply(place({ id: `o-${level}-${i}`, price: String(90 + level) }));
  }
  const steps = spyOn(engine, "digestStep");
  const routes = app(engine);
  const digestOf = async () =>
    ((await (await routes.request("/digest")).json()) as { digest: string }).digest;
  const [first, second] = await Promise.all([digestOf(), digestOf()]);
  expect(second).toBe(first);
  // Two levels, two levels, one level: three steps, for both requests together.
  expect(steps).toHaveBeenCalledTimes(3);
  expect(steps.mock.calls.every(([orders]) => orders === digestStepOrders)).toBe(true);
  expect(await digestOf()).toBe(first);
  expect(steps).toHaveBeenCalledTimes(4);
  engine.apply(place({ id: "b1", price: "1" }));
  const changed = await digestOf();
  expect(changed).not.toBe(first);
  expect(steps).toHaveBeenCalledTimes(5);
  const fresh = new MatchingEngine();
  for (const order of engine.restingOrders()) fresh.loadRestingOrder(order);
  expect(fresh.digest()).toBe(changed);
});
