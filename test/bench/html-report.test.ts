// Checks the HTML bench report: text is escaped, the series recorder produces sane points,
// checks are marked pass or fail, and a real headless Chromium renders the page with every
// chart holding data and the headline figure.

import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderHtmlReport } from "../../bench/html-report";
import type { BenchReport } from "../../bench/report";
import { type ReportSeries, SeriesRecorder } from "../../bench/series-recorder";
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

/** A pipeline report's stage histograms (seconds) and CPU, as run.ts puts them in `extra`. */
function pipelineExtras(): BenchReport["extra"] {
  const stage = (count: number, mean: number) => ({
    count,
    sum: count * mean,
    p50: mean,
    p95: mean * 2,
    p99: mean * 4,
    p999: mean * 8,
    max: mean * 9,
  });
  return {
    offered: "1000 commands/s",
    stages: JSON.stringify({
      matching_stage_queue_wait_seconds: stage(30_000, 0.004),
      matching_stage_decode_seconds: stage(600, 0.0002),
      matching_stage_match_seconds: stage(600, 0.0004),
      matching_stage_commit_seconds: stage(600, 0.002),
      matching_stage_durability_wait_seconds: stage(600, 0.006),
      matching_stage_ack_seconds: stage(600, 0.0001),
      matching_batch_size: stage(600, 50),
      matching_outbox_confirm_latency_seconds: stage(60_000, 0.01),
    }),
    cpuSeconds: JSON.stringify({ broker: 3.1, "valkey primary": 0.8, conductor: 1.9, bench: 1.2 }),
  };
}

/** The per-second samples and rewrite spans a pipeline run adds to its recorded series. */
function withPipelineSamples(series: ReportSeries): ReportSeries {
  return {
    ...series,
    timeline: series.timeline.map((point, i) => ({
      ...point,
      queueDepth: i * 40,
      streamLength: 900 - i * 10,
      batchSize: 20 + i,
      collections: { conductor: 2, outbox: 1 + (i % 2), bench: 3 },
    })),
    spans: [{ label: "AOF rewrite", detail: "primary", fromSeconds: 1.2, toSeconds: 2.1 }],
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
    expect(html.match(/<svg /g)?.length).toBe(4);
    expect(html).toContain("p50 0.436 · p99.9 88.6");
  });

  test("each check is marked pass or fail, its Failed flag folded in, evidence apart", () => {
    const report = syntheticReport();
    report.invariants = {
      ok: false,
      duplicateEventsReceived: 3,
      duplicateEventsReceivedFailed: true,
      commandFailures: 0,
      replicaConnected: true,
      eventsExpected: 60_000,
    };
    report.checks = ["duplicateEventsReceived", "commandFailures"];
    const html = renderHtmlReport(report, syntheticSeries());
    const row = (name: string) => new RegExp(`<tr class="(\\w+)"><td>${name}</td>`).exec(html)?.[1];
    expect(row("duplicateEventsReceived")).toBe("fail");
    expect(html).not.toContain("<td>duplicateEventsReceivedFailed</td>");
    expect(row("commandFailures")).toBe("pass");
    expect(row("replicaConnected")).toBe("pass");
    expect(html).not.toMatch(/<td>info<\/td>/);
    // Evidence is a figure without a verdict.
    expect(html).toContain('<tr><th>eventsExpected</th><td class="num">60,000</td></tr>');
  });

  test("stages, CPU and closed loop are shown for what they are", () => {
    const report = { ...syntheticReport(), extra: pipelineExtras() };
    const html = renderHtmlReport(report, withPipelineSamples(syntheticSeries()));
    expect(html).not.toContain("matching_stage_");
    expect(html).toMatch(
      /<td>durability wait<\/td><td>batch<\/td><td class="num">600<\/td><td class="num">6<\/td>/,
    );
    // 3.1 CPU seconds over 2.43 s and 30,000 commands.
    expect(html).toContain(
      '<td>broker</td><td class="num">3.10</td><td class="num">1.28</td><td class="num">103</td>',
    );
    expect(html).not.toContain("queueing");
    const closed = renderHtmlReport(
      {
        ...report,
        extra: { ...report.extra, offered: "closed loop (publish as fast as the broker accepts)" },
      },
      syntheticSeries(),
    );
    expect(closed).toContain("queueing + service p99");
    expect(closed).toContain("closed loop: mostly time spent queueing");
  });

  test("a last interval shorter than half a second is not drawn as a spike", () => {
    const recorder = new SeriesRecorder({ intervalMs: 1000 });
    recorder.start(0);
    for (let i = 1; i <= 2000; i++) recorder.record(1e6, i * 1e6);
    // 2,000 commands in 2 s, then 50 more in the next 20 ms.
    for (let i = 1; i <= 50; i++) recorder.record(1e6, 2e9 + i * 4e5);
    const { timeline } = recorder.series();
    expect(timeline.map((p) => Math.round(p.commandsPerSecond))).toEqual([999, 1000]);
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
    expect(html.match(/no data recorded/g)?.length).toBe(4);
    expect(html.match(/<svg /g)?.length).toBe(4);
  });

  test("renders in headless Chromium with every chart holding data and the headline figure", () => {
    // Absent Chromium is a failure, not a skip: a skipped render check looks like a pass.
    if (!existsSync(chromium)) {
      throw new Error(
        `${chromium} is missing; run scripts/install-chromium.sh (the test command should)`,
      );
    }
    const dir = tempDir("matchd-html-report-");
    try {
      const page = join(dir, "report.html");
      const report = { ...syntheticReport(), extra: pipelineExtras() };
      writeFileSync(page, renderHtmlReport(report, withPipelineSamples(syntheticSeries())));
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
      const charts = [
        "throughput",
        "latency",
        "backlog",
        "batch",
        "gc",
        "histogram",
        "percentiles",
        "stages",
      ];
      for (const id of charts) {
        // Each chart as Chromium parsed it, holding a drawn line or bar, not "no data".
        const svg = new RegExp(`<svg[^>]*id="chart-${id}"[\\s\\S]*?</svg>`).exec(dom)?.[0] ?? "";
        expect(svg).toMatch(/<(polyline|rect) [^>]*(points|width)="[^"]+"/);
        expect(svg).not.toContain("no data recorded");
      }
      // The rewrite is shaded on the charts over time.
      expect(dom).toContain("AOF rewrite (primary): 1.2–2.1 s");
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
