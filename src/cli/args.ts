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
      const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
      if (value === undefined) parsed.unknown.push(`${name} needs a value`);
      else parsed.flags.set(name, value);
    } else {
      parsed.unknown.push(`unknown flag ${name}`);
    }
  }
  return parsed;
}
