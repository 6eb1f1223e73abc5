/**
 * A report's charts over time and of its latency distribution: throughput, latency
 * percentiles, the command queue and event stream, batch size, garbage collections, the
 * histogram and the percentile plot. AOF rewrites are shaded on every chart over time.
 */
import type { Percentiles } from "./histogram";
import { histogramChart, type Line, lineChart, percentileChart } from "./html-charts";
import type { ReportSeries, TimelinePoint } from "./series-recorder";

const colors = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];

function section(title: string, chart: string): string {
  return `<section><h2>${title}</h2>${chart}</section>`;
}

function overTime(
  series: ReportSeries,
  spec: { id: string; label: string; yLabel: string; yLog?: boolean; area?: boolean },
  lines: [name: string, read: (p: TimelinePoint) => number | undefined][],
): string {
  const drawn: Line[] = lines.map(([name, read], i) => ({
    name,
    color: colors[i % colors.length]!,
    points: series.timeline.map((p): [number, number] => [p.tSeconds, read(p) ?? Number.NaN]),
  }));
  return lineChart({
    ...spec,
    xLabel: "seconds",
    yLog: spec.yLog ?? false,
    area: spec.area ?? false,
    lines: drawn,
    ...(series.spans === undefined ? {} : { spans: series.spans }),
  });
}

/** Every chart the series has data for; the first three always show, empty or not. */
export function timeCharts(series: ReportSeries, l: Percentiles, closedLoop: boolean): string {
  const t = series.timeline;
  const latencyTitle = closedLoop
    ? "Latency over time (closed loop: mostly time spent queueing)"
    : "Latency percentiles over time";
  const parts = [
    section(
      "Throughput over time",
      overTime(
        series,
        { id: "chart-throughput", label: "Throughput over time", yLabel: "commands/s", area: true },
        [["commands/s", (p) => p.commandsPerSecond]],
      ),
    ),
    // Drawn in this order so max lies on top: with few commands per interval p99 equals max.
    section(
      latencyTitle,
      overTime(
        series,
        { id: "chart-latency", label: latencyTitle, yLabel: "ms (log)", yLog: true },
        [
          ["p50", (p) => p.p50Ms],
          ["p99", (p) => p.p99Ms],
          ["max", (p) => p.maxMs],
        ],
      ),
    ),
  ];
  if (t.some((p) => p.queueDepth !== undefined)) {
    const label = "Command queue depth and event stream length (the most seen each second)";
    parts.push(
      section(
        "Backlogs over time",
        overTime(series, { id: "chart-backlog", label, yLabel: "messages / entries" }, [
          ["command queue", (p) => p.queueDepth],
          ["event stream", (p) => p.streamLength],
        ]),
      ),
    );
  }
  if (t.some((p) => p.batchSize !== undefined)) {
    const label = "The conductor's mean batch (commands per commit)";
    parts.push(
      section(
        "Batch size over time",
        overTime(series, { id: "chart-batch", label, yLabel: "commands per batch" }, [
          ["mean batch", (p) => p.batchSize],
        ]),
      ),
    );
  }
  const processes = [...new Set(t.flatMap((p) => Object.keys(p.collections ?? {})))];
  if (processes.length > 0) {
    const label = "Garbage collections observed per second, by process (a lower bound)";
    parts.push(
      section(
        "Garbage collections over time",
        overTime(
          series,
          { id: "chart-gc", label, yLabel: "collections/s" },
          processes.map((name): [string, (p: TimelinePoint) => number | undefined] => [
            name,
            (p) => p.collections?.[name],
          ]),
        ),
      ),
    );
  }
  parts.push(
    section(
      "Latency distribution",
      histogramChart(series.histogram, [
        ["p50", l.p50, "#2563eb"],
        ["p99", l.p99, "#ea580c"],
        ["max", l.max, "#b91c1c"],
      ]),
    ),
    section("Latency by percentile", percentileChart(series.histogram)),
  );
  return parts.join("\n");
}
