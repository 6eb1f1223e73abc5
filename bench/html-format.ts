/**
 * Text for the HTML reports: escaping, numbers as people read them (integers without
 * decimals, milliseconds to three figures), and the key/value table.
 */

/** Escapes text for HTML element content and double- or single-quoted attributes. */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

export const esc = escapeHtml;

export function formatCount(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}

export function formatNumber(value: number): string {
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  return value.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

/**
 * Callers put nested figures (a percentile set, a stage breakdown) into `extra` as JSON
 * strings; a flat JSON object reads better as "p50 0.27 · p99 1.97". Anything else is shown as is.
 */
export function readableJson(text: string): string {
  if (!text.startsWith("{")) return text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return text;
  const parts: string[] = [];
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value === "object" && value !== null) return text;
    const label = key === "p999" ? "p99.9" : key;
    parts.push(`${label} ${typeof value === "number" ? formatMs(value) : String(value)}`);
  }
  return parts.join(" · ");
}

/** Three significant figures below 100 ms, whole milliseconds above. */
export function formatMs(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString("en-US");
  return Number(value.toPrecision(3)).toString();
}

export function table(rows: [string, string][]): string {
  const body = rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td class="num">${esc(v)}</td></tr>`);
  return `<table class="kv">${body.join("")}</table>`;
}
