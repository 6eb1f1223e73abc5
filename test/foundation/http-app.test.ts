// The shared HTTP surface in-process: /metrics answers even when the datastore refresh behind
// it hangs or fails, with the gauges' last values.

import { expect, test } from "bun:test";
import {
  createHttpApp,
  metricsRefreshTimeoutMs,
  prefersPrometheusText,
} from "../../src/infra/http/app";
import { MetricsRegistry } from "../../src/infra/metrics";

function appWith(beforeMetrics: () => Promise<void>) {
  const metrics = new MetricsRegistry();
  const gauge = metrics.gauge("matching_test_gauge", "a gauge the refresh would set");
  gauge.set(7);
  const app = createHttpApp({
    metrics,
    readiness: () => ({ ready: true, status: "ready", reasons: [] }),
    beforeMetrics,
  });
  return app;
}

test("/metrics answers within the refresh timeout when the refresh never settles", async () => {
  const app = appWith(() => new Promise<void>(() => undefined));
  const started = performance.now();
  const response = await app.request("/metrics");
  const waited = performance.now() - started;
  expect(response.status).toBe(200);
  expect(((await response.json()) as Record<string, unknown>).matching_test_gauge).toBe(7);
  expect(waited).toBeGreaterThanOrEqual(metricsRefreshTimeoutMs - 50);
  // Far below a client's scrape timeout; a hang would end the test at its own timeout.
  expect(waited).toBeLessThan(metricsRefreshTimeoutMs + 2000);
});

test("/metrics answers when the refresh fails", async () => {
  const app = appWith(() => Promise.reject(new Error("datastore gone")));
  const response = await app.request("/metrics", { headers: { accept: "text/plain" } });
  expect(response.status).toBe(200);
  expect(await response.text()).toContain("matching_test_gauge 7");
});

test("/metrics answers JSON unless Accept ranks Prometheus text above JSON", async () => {
  const app = appWith(() => Promise.resolve());
  // axios's default lists JSON first and text/plain equally: its callers use .json().
  const axios = await app.request("/metrics", {
    headers: { accept: "application/json, text/plain, */*" },
  });
  expect(((await axios.json()) as Record<string, unknown>).matching_test_gauge).toBe(7);
  // Prometheus's own scrape header.
  const prometheus = await app.request("/metrics", {
    headers: {
      accept:
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    },
  });
  expect(await prometheus.text()).toContain("matching_test_gauge 7");
  expect(prefersPrometheusText("")).toBe(false);
  expect(prefersPrometheusText("*/*")).toBe(false);
  expect(prefersPrometheusText("text/plain")).toBe(true);
  expect(prefersPrometheusText("application/json;q=0.5, text/plain")).toBe(true);
  expect(prefersPrometheusText("text/plain;q=0.5, application/json")).toBe(false);
  expect(prefersPrometheusText("text/plain;q=0")).toBe(false);
  expect(prefersPrometheusText("TEXT/PLAIN; charset=utf-8")).toBe(true);
});
