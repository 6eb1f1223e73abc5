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
      parsed.unknown.push(`unknown flag ${name}`);
    }
  }
  return parsed;
}
