/**
 * Splits argv into positionals, valued flags and boolean switches, and reports any
 * flag the subcommand does not know, so typos never pass silently.
 */

export interface ParsedArgs {
  positionals: string[];
  flags: Map<string, string>;
  switches: Set<string>;
  unknown: string[];
}

export function parseArgs(
  argv: readonly string[],
  valued: ReadonlySet<string>,
  booleans: ReadonlySet<string>,
): ParsedArgs {
  const parsed: ParsedArgs = {
    positionals: [],
    flags: new Map(),
    switches: new Set(),
    unknown: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--") || arg === "--") {
      parsed.positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    if (booleans.has(name) && eq < 0) {
      parsed.switches.add(name);
    } else if (valued.has(name)) {
      // `--dir --help` means a forgotten value, not a directory named --help: a separate
      // value may not look like a flag (`--dir=--x` still says it means it).
      const next = argv[i + 1];
      const value =
        eq > 0
          ? arg.slice(eq + 1)
          : next !== undefined && !next.startsWith("--")
            ? next
            : undefined;
      if (eq < 0 && value !== undefined) i++;
      if (value === undefined) parsed.unknown.push(`${name} needs a value`);
      // A second value would silently win over the first (`--partition 1 --partition 0`).
      else if (parsed.flags.has(name)) parsed.unknown.push(`${name} given more than once`);
      else parsed.flags.set(name, value);
    } else if (booleans.has(name)) {
      parsed.unknown.push(`${name} takes no value`);
    } else {
      const near = closestFlag(name, [...valued, ...booleans]);
      parsed.unknown.push(`unknown flag ${name}${near === null ? "" : ` (did you mean ${near}?)`}`);
    }
  }
  return parsed;
}

/** The known flag nearest to a mistyped one, when it is near enough to be what was meant. */
export function closestFlag(name: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  let bestShared = -1;
  for (const flag of known) {
    const distance = editDistance(name, flag);
    // Of two as near, the one sharing the longer start (`--sid`: --side, not --id).
    const shared = sharedStart(name, flag);
    if (distance < bestDistance || (distance === bestDistance && shared > bestShared)) {
      best = flag;
      bestDistance = distance;
      bestShared = shared;
    }
  }
  // A third of the name may be wrong (`--partiton`, `--durabilty`), never the whole of a
  // short one (`--x` is no `--dir`).
  return best !== null && bestDistance <= Math.max(1, Math.floor((name.length - 2) / 3))
    ? best
    : null;
}

function sharedStart(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** Levenshtein distance: insertions, deletions and substitutions, one each. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length]!;
}
