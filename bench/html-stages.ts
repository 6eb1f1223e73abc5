/**
 * The conductor's and outbox's stage histograms (a pipeline report's `stages`) as a table and
 * a stacked chart: where a command's time goes, stage by stage, in milliseconds.
 */
import { stackedBarChart } from "./html-charts";
import { esc, formatCount, formatMs } from "./html-format";

interface StageFigures {
  count: number;
  sum: number;
  p50: number;
  p99: number;
  max: number;
}

/** In the order a command meets them; the unit each histogram counts. */
const stageNames: [metric: string, name: string, per: string][] = [
  ["matching_stage_queue_wait_seconds", "queue wait", "command"],
  ["matching_stage_decode_seconds", "decode", "batch"],
  ["matching_stage_dedup_lookup_seconds", "dedup lookup", "batch"],
  ["matching_stage_match_seconds", "match", "batch"],
  ["matching_stage_commit_seconds", "commit", "batch"],
  ["matching_stage_durability_wait_seconds", "durability wait", "batch"],
  ["matching_stage_ack_seconds", "ack", "batch"],
  ["matching_outbox_confirm_latency_seconds", "outbox confirm", "event"],
];

function isFigures(value: unknown): value is StageFigures {
  if (value === null || typeof value !== "object") return false;
  const v = value as Record<string, unknown>;
  return ["count", "sum", "p50", "p99", "max"].every((k) => typeof v[k] === "number");
}

/** Each stage found in the JSON, in a command's order; an unreadable text gives none. */
export function parseStages(text: unknown): { name: string; per: string; f: StageFigures }[] {
  if (typeof text !== "string") return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [];
  }
  if (parsed === null || typeof parsed !== "object") return [];
  const found = parsed as Record<string, unknown>;
  return stageNames.flatMap(([metric, name, per]) => {
    const f = found[metric];
    return isFigures(f) && f.count > 0 ? [{ name, per, f }] : [];
  });
}

/** The stage table and stacked chart; empty when the report has no stages. */
export function stagesSection(text: unknown): string {
  const stages = parseStages(text);
  if (stages.length === 0) return "";
  const ms = (seconds: number) => seconds * 1000;
  const rows = stages
    .map(
      ({ name, per, f }) =>
        `<tr><td>${esc(name)}</td><td>${per}</td><td class="num">${formatCount(f.count)}</td><td class="num">${formatMs(ms(f.sum / f.count))}</td><td class="num">${formatMs(ms(f.p50))}</td><td class="num">${formatMs(ms(f.p99))}</td><td class="num">${formatMs(ms(f.max))}</td></tr>`,
    )
    .join("");
  const bar = (name: string, pick: (f: StageFigures) => number) => ({
    name,
    segments: stages.map((s) => ({ name: s.name, value: ms(pick(s.f)) })),
  });
  const chart = stackedBarChart({
    id: "chart-stages",
    label: "Where a command's time goes, stage by stage",
    unit: "ms",
    bars: [
      bar("mean", (f) => f.sum / f.count),
      bar("p50 each", (f) => f.p50),
      bar("p99 each", (f) => f.p99),
    ],
  });
  return `<section><h2>Where the time goes</h2>
<p class="note">A command waits in its queue, then goes through its batch's stages; with the outbox, each of its events waits for the broker's confirm. Percentiles are bucket bounds of each stage's own histogram, so the stacked p50 and p99 are each stage's figure added, not the percentile of a command's total. The histograms cover every command since the services started.</p>
<table class="stages"><thead><tr><th>stage</th><th>counted per</th><th>count</th><th>mean ms</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr></thead><tbody>${rows}</tbody></table>
${chart}</section>`;
}
