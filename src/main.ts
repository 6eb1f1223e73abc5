/**
 * The matchd executable: turns argv into a subcommand, resolves the configuration
 * once from the environment and flags, and runs it. The only reader of the settings'
 * variables (MATCHING_*); the test hooks are read in infra/kill-point.ts, and the
 * allocator's variable is only reported (infra/allocator-env.ts).
 */
import { hostname } from "node:os";
import packageJson from "../package.json";
import { closestFlag, parseArgs } from "./cli/args";
import { runCheck } from "./cli/check";
import { clientCommands } from "./cli/client/commands-list";
import { commandUsage, helpHint, mainUsage } from "./cli/usage";
import { flagsOutsideScope } from "./config/flag-scope";
import { resolveConfig, unknownSettingNames } from "./config/resolve";
import { type Config, configFlags, type Subcommand } from "./config/schema";
import { BrokerRefusedError } from "./infra/amqp/broker-errors";
import { PolicyRefusedError } from "./infra/boot";
import { ExitCode } from "./infra/exit-codes";
import { createLogger, type Logger } from "./infra/log";

const stackValued = new Set(["--dir"]);

const subcommands: readonly Subcommand[] = [
  "conductor",
  "outbox",
  "feed",
  "bench",
  "stack",
  "check",
];

/** A usage error: the problem, then where help is (helpHint); exit 2. */
function fail(message: string, command?: string): never {
  process.stderr.write(`matchd: ${message}\n${helpHint(command)}`);
  process.exit(ExitCode.usage);
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(mainUsage);
    return name === undefined ? ExitCode.usage : ExitCode.ok;
  }
  if (name === "--version" || name === "-v") {
    process.stdout.write(`matchd ${packageJson.version} (bun ${Bun.version})\n`);
    return ExitCode.ok;
  }
  if ((clientCommands as readonly string[]).includes(name)) {
    warnUnknownVariables();
    const { runClient } = await import("./cli/client/run");
    return runClient(name, rest, {
      env: process.env,
      out: (text) => process.stdout.write(text),
      err: (text) => process.stderr.write(text),
      // Only `events` and `watch` run until stopped; the others keep the default end at Ctrl-C.
      stopped: name === "events" || name === "watch" ? signalled() : new Promise(() => undefined),
    });
  }
  if (!subcommands.includes(name as Subcommand)) {
    const near = closestFlag(name, [...subcommands, ...clientCommands]);
    fail(`unknown command ${name}${near === null ? "" : ` (did you mean ${near}?)`}`);
  }
  return runSubcommand(name as Subcommand, rest);
}

/** The switches (flags without a value) each subcommand takes besides --help. */
const subcommandSwitches: Partial<Record<Subcommand, readonly string[]>> = {
  stack: ["--no-tap", "--ha", "--cluster"],
  bench: ["--json", "--keep-stack"],
};

type Bench = Awaited<ReturnType<typeof loadBench>>;
type Args = ReturnType<typeof parseArgs>;

async function runSubcommand(subcommand: Subcommand, rest: string[]): Promise<number> {
  // The bench beside the service: loaded only to run it (or say its help).
  const bench = subcommand === "bench" ? await loadBench() : undefined;
  const valued = new Set(subcommand === "stack" ? stackValued : configFlags);
  for (const flag of bench?.valuedFlags ?? []) valued.add(flag);
  const switches = new Set(["--help", ...(subcommandSwitches[subcommand] ?? [])]);
  const args = parseArgs(rest, valued, switches);
  if (args.switches.has("--help") || args.positionals.includes("-h")) {
    process.stdout.write(bench?.usage ?? commandUsage[subcommand]!);
    return ExitCode.ok;
  }
  if (subcommand === "stack") {
    if (args.unknown.length > 0) fail(args.unknown.join("; "), subcommand);
    return runStackCommand(args.positionals, args.flags, args.switches);
  }
  // Said whatever the log level and whether or not the rest is valid: a misspelt name leaves
  // its setting at the default, which is often what the problems below are about.
  const unknownNames = warnUnknownVariables();
  // Every problem of the command line and the configuration at once, nothing started.
  const resolved = resolveConfig(process.env, args.flags, subcommand, hostname());
  const problems = [
    ...args.unknown,
    ...unexpectedArguments(subcommand, args.positionals),
    ...flagsOutsideScope(subcommand, args.flags),
    ...(resolved.ok ? [] : resolved.problems),
    ...(bench === undefined ? [] : benchFlagProblems(bench, args)),
  ];
  if (problems.length > 0 || !resolved.ok) {
    process.stderr.write(
      `matchd: invalid command line or configuration, nothing started:\n${problems.map((p) => `  - ${p}`).join("\n")}\n${helpHint(subcommand)}`,
    );
    return ExitCode.usage;
  }
  const config = resolved.config;
  const log = createLogger(config.logLevel, { service: subcommand, partition: config.partition });
  // Also as a log line, for pipelines that read the services' JSON logs (said above in plain
  // text, whatever the level).
  for (const name of unknownNames) {
    log.warn("environment variable is no setting and is ignored (misspelt?)", { name });
  }
  return runConfigured(subcommand, config, log, args, bench);
}

/** The bench's problems with its boundary and flags. */
function benchFlagProblems(bench: Bench, args: Args): string[] {
  const [boundary] = args.positionals;
  if (boundary === undefined) return ["bench needs a boundary"];
  if (!bench.benchBoundaries.includes(boundary)) return [`unknown boundary ${boundary}`];
  const keepStack = args.switches.has("--keep-stack");
  return bench.benchProblems(boundary, args.flags, benchEnvironment(args.flags), keepStack);
}

async function runConfigured(
  subcommand: Subcommand,
  config: Config,
  log: Logger,
  args: Args,
  bench: Bench | undefined,
): Promise<number> {
  switch (subcommand) {
    case "check":
      return runCheck(config, (line) => process.stdout.write(line + "\n"));
    case "conductor": {
      const { runConductor } = await import("./conductor/run");
      return runConductor(config, log);
    }
    case "outbox": {
      const { runOutbox } = await import("./outbox/run");
      return runOutbox(config, log);
    }
    case "feed": {
      const { runFeed } = await import("./feed/run");
      return runFeed(config, log);
    }
    case "bench": {
      const [boundary] = args.positionals;
      if (bench === undefined || boundary === undefined) return ExitCode.usage;
      return bench.runBench(boundary, {
        config,
        env: benchEnvironment(args.flags),
        flags: args.flags,
        json: args.switches.has("--json"),
        keepStack: args.switches.has("--keep-stack"),
      });
    }
    default:
      return ExitCode.usage;
  }
}

/** The bench's entry points, its help and the flags that take a value. */
async function loadBench() {
  const [run, registry, usage] = await Promise.all([
    import("../bench/run"),
    import("../bench/registry"),
    import("../bench/usage"),
  ]);
  return {
    ...run,
    usage: usage.benchUsage(),
    valuedFlags: registry.benchValuedFlags(),
  };
}

/** Names each MATCHING_* variable that is no setting on stderr, and returns them. */
function warnUnknownVariables(): string[] {
  const names = unknownSettingNames(process.env);
  for (const name of names) {
    process.stderr.write(
      `matchd: warning: environment variable ${name} is no setting and is ignored (misspelt?)\n`,
    );
  }
  return names;
}

/** Resolves at the first SIGINT or SIGTERM (a client command then ends cleanly). */
function signalled(): Promise<string> {
  return new Promise((resolve) => {
    for (const signal of ["SIGINT", "SIGTERM"] as const)
      process.once(signal, () => resolve(signal));
  });
}

/** Positional arguments the subcommand does not take (bench takes one: its boundary). */
function unexpectedArguments(subcommand: Subcommand, positionals: readonly string[]): string[] {
  const extra = subcommand === "bench" ? positionals.slice(1) : positionals;
  return extra.map((argument) => `unexpected argument ${argument}`);
}

/**
 * Whether the user pointed the bench at running services, by environment or by flag (flags
 * win everywhere; the bench reads no env itself).
 */
function benchEnvironment(flags: ReadonlyMap<string, string>): {
  datastoreGiven: boolean;
  brokerGiven: boolean;
} {
  return {
    datastoreGiven: Boolean(process.env.MATCHING_DATASTORE_URL) || flags.has("--datastore-url"),
    brokerGiven: Boolean(process.env.MATCHING_BROKER_URL) || flags.has("--broker-url"),
  };
}

async function runStackCommand(
  positionals: string[],
  flags: Map<string, string>,
  switches: Set<string>,
): Promise<number> {
  const [action, ...extra] = positionals;
  const dir = flags.get("--dir");
  if (!action || !["up", "down", "status"].includes(action))
    fail("stack needs up, down or status", "stack");
  if (extra.length > 0) fail(`unexpected argument ${extra[0]}`, "stack");
  if (!dir) fail("stack needs --dir DIR", "stack");
  const stack = await import("./stack/index");
  if (action === "up") {
    const info = await stack.stackUp({
      dir,
      log: (line) => process.stderr.write(`stack: ${line}\n`),
      tap: !switches.has("--no-tap"),
      ha: switches.has("--ha"),
      cluster: switches.has("--cluster"),
    });
    process.stdout.write(
      `MATCHING_DATASTORE_URL=${info.datastoreUrl}\nMATCHING_REPLICA_URL=${info.replicaUrl}\nMATCHING_BROKER_URL=${info.brokerUrl}\n`,
    );
    process.stderr.write(stackNextSteps(info.dir));
    return ExitCode.ok;
  }
  if (action === "down") {
    const { stopped } = await stack.stackDown({ dir });
    process.stdout.write(`stopped: ${stopped.join(", ") || "nothing"}\n`);
    return ExitCode.ok;
  }
  const status = await stack.stackStatus(dir);
  process.stdout.write(JSON.stringify(status, null, 2) + "\n");
  return ExitCode.ok;
}

/** What to type next on a fresh stack: a conductor, an outbox, a feed and a first order. */
function stackNextSteps(dir: string): string {
  return `
next, in this shell:
  source ${dir}/env
  ./matchd conductor >${dir}/conductor.log 2>&1 &
  ./matchd outbox >${dir}/outbox.log 2>&1 &
  ./matchd feed >${dir}/feed.log 2>&1 &
  ./matchd order place --pair 1 --side bid --price 100 --volume 1
  ./matchd book 1
  ./matchd watch 1     (or open http://127.0.0.1:3040/?pair=1)
stop it with: ./matchd stack down --dir ${dir}
`;
}

main(process.argv.slice(2)).then(
  // Exit explicitly: a finished command must not linger on an idle socket or timer.
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof PolicyRefusedError) {
      process.stderr.write(`matchd: ${error.message}\n`);
      process.exit(ExitCode.policyRefused);
    }
    if (error instanceof BrokerRefusedError) {
      process.stderr.write(`matchd: ${error.message}\n`);
      process.exit(ExitCode.brokerRefused);
    }
    process.stderr.write(
      `matchd: fatal: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(ExitCode.failure);
  },
);

export type { Config };
