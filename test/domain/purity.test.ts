// Keeps src/domain pure: it may import only decimal.js, zod and its own files, and must not touch
// clocks, randomness or runtime globals such as Bun and process.

import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const domainDir = join(import.meta.dir, "../../src/domain");
const allowedPackages = new Set(["decimal.js", "zod"]);
const forbidden = [
  /\bDate\.now\b/,
  /\bnew Date\b/,
  /\bMath\.random\b/,
  /\bperformance\./,
  /\bBun\./,
  /\bprocess\./,
  /\bcrypto\./,
  /\brequire\(/,
  /\bsetTimeout\b/,
];

const files = readdirSync(domainDir, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".ts"));

test("src/domain has files to scan", () => {
  expect(files.length).toBeGreaterThan(5);
});

test.each(files)("%s imports only decimal.js, zod and relative domain files", (file) => {
  const source = readFileSync(join(domainDir, file), "utf8");
  const specifiers = [
    ...source.matchAll(
      /(?:import|export)\s[^'"]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g,
    ),
  ].map((m) => m[1] ?? m[2] ?? "");
  for (const specifier of specifiers) {
    const ok =
      allowedPackages.has(specifier) || (specifier.startsWith("./") && !specifier.includes(".."));
    expect(ok ? specifier : `forbidden import ${specifier}`).toBe(specifier);
  }
  for (const pattern of forbidden) {
    expect(pattern.test(source) ? `uses ${pattern}` : "clean").toBe("clean");
  }
});
