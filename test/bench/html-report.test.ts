// Checks the HTML bench report: text is escaped, the series recorder produces sane points,
// and a real headless Chromium renders the page with its three charts and headline figure.

import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderHtmlReport } from "../../src/bench/html-report";
import type { BenchReport } from "../../src/bench/report";
import { type ReportSeries, SeriesRecorder } from "../../src/bench/series-recorder";
import { tempDir } from "../support/temp-dir";

const chromium = "/usr/bin/chromium";

function syntheticReport(): BenchReport {
  return {
    boundary: "datastore",
    boundaryStatement: "MULTI/HSET/ZADD/XADD/SET/EXEC in isolation, one connection per partition",
    durability: "aof-replicated (WAITAOF 1 1, appendfsync always)",
    workload: "commit-shape <script>alert(1)</script>",
    workloadDescription: "450-byte event & one order hash",
    commands: 30_000,
    warmup: 500,
    seconds: 2.43,
    commandsPerSecond: 12_345.6,
    latencyMs: { p50: 0.412, p95: 0.93, p99: 1.87, p999: 6.2, max: 41.5 },
    invariants: { ok: false, keysDeleted: true, durabilityTimeouts: 0, replicaConnected: false },
    environment: {
      cpuModel: "Test CPU",
      cores: 2,
      os: "linux test",
      runtime: "bun test",
      totalMemoryBytes: 8 * 2 ** 30,
    },
    extra: {
      waitDurableP99Ms: 1.2,
      note: "noisy shared host",
      "durability wait alone ms": JSON.stringify({ p50: 0.4362, p999: 88.6047 }),
    },
  };
}

/** A deterministic run with a 2.5-second stall, recorded through SeriesRecorder. */
function syntheticSeries(): ReportSeries {
  const recorder = new SeriesRecorder({ intervalMs: 1000 });
  let seed = 42;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  let nowNs = 1e9;
  recorder.start(nowNs);
  for (let i = 0; i < 30_000; i++) {
    // Log-normal-ish latencies around 0.4 ms with a long tail.
    const latencyNs = 4e5 * Math.exp((random() + random() + random() - 1.5) * 1.6);
    nowNs += i === 15_000 ? 2.5e9 : 8e4;
    recorder.record(latencyNs, nowNs);
  }
  return recorder.series();
}

describe("renderHtmlReport", () => {
  test("escapes report text and needs nothing from the network", () => {
    const html = renderHtmlReport(syntheticReport(), syntheticSeries());
    expect(html).not.toContain("<script");
    expect(html).toContain("commit-shape &lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).toContain("450-byte event &amp; one order hash");
    expect(html).not.toMatch(/(src|href)=["']?https?:/);
    expect(html).not.toContain("@import");
    expect(html.match(/<svg /g)?.length).toBe(3);
    expect(html).toContain("p50 0.436 · p99.9 88.6");
  });

  test("a failed check's evidence and its Failed flag are shown as failures, not info and pass", () => {
    const report = syntheticReport();
    report.invariants = {
      ok: false,
      duplicateEventsReceived: 3,
      duplicateEventsReceivedFailed: true,
      commandFailures: 0,
    };
    const html = renderHtmlReport(report, syntheticSeries());
    const row = (name: string) => new RegExp(`<tr class="(\\w+)"><td>${name}</td>`).exec(html)?.[1];
    expect(row("duplicateEventsReceived")).toBe("fail");
    expect(row("duplicateEventsReceivedFailed")).toBe("fail");
    expect(row("commandFailures")).toBe("info");
  });

  test("series recorder shows a stall as a zero-throughput interval", () => {
    const { timeline, histogram } = syntheticSeries();
    expect(timeline.length).toBeGreaterThanOrEqual(3);
    expect(timeline.some((p) => p.commandsPerSecond === 0)).toBe(true);
    const total = histogram.reduce((sum, b) => sum + b.count, 0);
    expect(total).toBe(30_000);
    for (let i = 1; i < histogram.length; i++) {
      expect(histogram[i]!.upperMs).toBeGreaterThan(histogram[i - 1]!.upperMs);
    }
  });

  test("renders 'no data' instead of failing on empty series", () => {
    const html = renderHtmlReport(syntheticReport(), { timeline: [], histogram: [] });
    expect(html.match(/no data recorded/g)?.length).toBe(3);
    expect(html.match(/<svg /g)?.length).toBe(3);
  });

  test("renders in headless Chromium with three charts and the headline figure", () => {
    // Absent Chromium is a failure, not a skip: a skipped render check looks like a pass.
    if (!existsSync(chromium)) {
      throw new Error(
        `${chromium} is missing; run scripts/install-chromium.sh (the test command should)`,
      );
    }
    const dir = tempDir("matchd-html-report-");
    try {
      const page = join(dir, "report.html");
      writeFileSync(page, renderHtmlReport(syntheticReport(), syntheticSeries()));
      const screenshot = join(dir, "report.png");
      const args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
      ];
      const dump = Bun.spawnSync(
        [
          chromium,
          ...args,
          `--user-data-dir=${join(dir, "profile-dom")}`,
          "--dump-dom",
          `file://${page}`,
        ],
        { stdout: "pipe", stderr: "pipe", timeout: 60_000 },
      );
      const dom = dump.stdout.toString();
      if (dump.exitCode !== 0 || dom === "") {
        throw new Error(`chromium --dump-dom failed (${dump.exitCode}): ${dump.stderr.toString()}`);
      }
      for (const id of ["chart-throughput", "chart-latency", "chart-histogram"]) {
        expect(dom).toMatch(new RegExp(`<svg[^>]*id="${id}"`));
      }
      expect(dom).toContain('<span id="headline-figure" class="figure">12,346</span>');
      expect(dom).toMatch(/<polyline[^>]*points="[^"]+"/);
      expect(dom).toMatch(/<rect x=[^>]*fill="#2563eb"/);

      const shot = Bun.spawnSync(
        [
          chromium,
          ...args,
          `--user-data-dir=${join(dir, "profile-shot")}`,
          `--screenshot=${screenshot}`,
          "--window-size=1200,2000",
          `file://${page}`,
        ],
        { stdout: "pipe", stderr: "pipe", timeout: 60_000 },
      );
      expect(shot.exitCode).toBe(0);
      // A PNG signature and a size well above a blank page's.
      const png = readFileSync(screenshot);
      expect(png.subarray(1, 4).toString()).toBe("PNG");
      expect(statSync(screenshot).size).toBeGreaterThan(20_000);
      if (process.env.MATCHD_KEEP_REPORT_SCREENSHOT) {
        writeFileSync(process.env.MATCHD_KEEP_REPORT_SCREENSHOT, png);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);
});
