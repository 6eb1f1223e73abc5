/**
 * The client commands (`order place|cancel|amend|cancel-all`, `pair halt|resume`, `book`,
 * `result`, `events`): their flags and
 * the shared settings resolved at once (every problem listed, nothing sent), then one
 * command run, its outcome printed for a person or, with --json, for a script.
 */
import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { clientSettingsRead } from "../../config/flag-scope";
import { resolveConfig } from "../../config/resolve";
import { configFlags } from "../../config/schema";
import type { CommandEnvelope, CommandResult } from "../../domain/index";
import { ExitCode } from "../../infra/exit-codes";
import { parseArgs } from "../args";
import { helpHint } from "../usage";
import { ClientError, rejectedExitCode } from "./client-error";
import {
  amendCommand,
  cancelAfterCommand,
  cancelAllCommand,
  cancelCommand,
  ocoCommand,
  pairCommand,
  placeCommand,
} from "./commands";
import { followEvents } from "./events";
import { bookLadder, resultLine } from "./format";
import {
  amendSchema,
  bookSchema,
  cancelAfterSchema,
  cancelAllSchema,
  cancelSchema,
  eventsSchema,
  flagsOf,
  ocoSchema,
  pairSchema,
  parseOptions,
  placeSchema,
  resultSchema,
  watchSchema,
} from "./options";
import { fetchBook, fetchResult } from "./queries";
import { brokerUser, sendCommand } from "./rpc";
import { clientUsage } from "./usage";
import { watchBook } from "./watch";

interface Io {
  env: Readonly<Record<string, string | undefined>>;
  out: (text: string) => void;
  err: (text: string) => void;
  /** Resolves at SIGINT or SIGTERM. */
  stopped: Promise<unknown>;
}

/** Each command's flags, by its name and (order, pair) its action. */
const schemas: Record<string, z.ZodType> = {
  "order place": placeSchema,
  "order cancel": cancelSchema,
  "order amend": amendSchema,
  "order cancel-all": cancelAllSchema,
  "order oco": ocoSchema,
  "pair halt": pairSchema,
  "pair resume": pairSchema,
  "session cancel-after": cancelAfterSchema,
  book: bookSchema,
  watch: watchSchema,
  result: resultSchema,
  events: eventsSchema,
};

/** The commands that take an action first, and the actions each takes. */
const actionsOf: Record<string, string[]> = {
  order: ["place", "oco", "cancel", "amend", "cancel-all"],
  pair: ["halt", "resume"],
  session: ["cancel-after"],
};

/** Positionals each command takes after its name (and after its action). */
const positionalsOf: Record<string, string[]> = {
  "order place": [],
  "order cancel": ["ORDER_ID"],
  "order amend": [],
  "order cancel-all": [],
  "order oco": [],
  "pair halt": [],
  "pair resume": [],
  "session cancel-after": [],
  book: ["PAIR"],
  watch: ["PAIR"],
  result: ["COMMAND_ID"],
  events: [],
};

export async function runClient(command: string, argv: string[], io: Io): Promise<number> {
  const usage = clientUsage[command]!;
  const actions = actionsOf[command];
  const action = actions === undefined ? undefined : argv[0];
  const rest = actions === undefined ? argv : argv.slice(1);
  if (argv.includes("--help") || argv.includes("-h")) {
    io.out(usage);
    return ExitCode.ok;
  }
  const schema = schemas[action === undefined ? command : `${command} ${action}`];
  if (schema === undefined) {
    const list = (actions ?? []).join(", ").replace(/, ([^,]+)$/, " or $1");
    io.err(`matchd: ${command} needs ${list}\n${helpHint(command)}`);
    return ExitCode.usage;
  }
  const own = flagsOf(schema);
  const args = parseArgs(rest, new Set([...own.valued, ...configFlags]), new Set(own.switches));
  // Settings flags are in the parser's set so that they are scoped (refused with who reads
  // them), not reported as unknown; the client's own flags are no settings.
  const settingFlags = new Map([...args.flags].filter(([flag]) => configFlags.has(flag)));
  const ownFlags = new Map([...args.flags].filter(([flag]) => !configFlags.has(flag)));
  const resolved = resolveConfig(io.env, settingFlags, "client");
  const parsed = parseOptions(schema, ownFlags, args.switches);
  const key = action === undefined ? command : `${command} ${action}`;
  const names = positionalsOf[key]!;
  const problems = [
    ...args.unknown,
    ...[...settingFlags.keys()]
      .filter((flag) => !clientSettingsRead[key]!.includes(flag))
      .map((flag) => `${flag} does not apply to ${key}`),
    ...(resolved.ok ? [] : resolved.problems),
    ...(parsed.ok ? [] : parsed.problems),
    ...names.slice(args.positionals.length).map((name) => `${key} needs ${name}`),
    ...args.positionals.slice(names.length).map((extra) => `unexpected argument ${extra}`),
    ...((key === "order cancel-all" || key === "session cancel-after") &&
    ownFlags.has("--pair") &&
    settingFlags.has("--partition")
      ? [`--partition: names the partition of a ${action} without --pair; give one of them`]
      : []),
    ...((command === "book" || command === "watch") &&
    args.positionals[0] !== undefined &&
    !/^[1-9]\d{0,15}$/.test(args.positionals[0])
      ? [`PAIR: not a positive integer (got ${JSON.stringify(args.positionals[0])})`]
      : []),
  ];
  if (problems.length > 0 || !resolved.ok || !parsed.ok) {
    io.err(
      `matchd: invalid command line or configuration, nothing sent:\n${problems.map((p) => `  - ${p}`).join("\n")}\n${helpHint(key)}`,
    );
    return ExitCode.usage;
  }
  try {
    return await runParsed(
      key,
      args.positionals,
      parsed.options as Record<string, unknown>,
      resolved.config,
      io,
    );
  } catch (error) {
    if (!(error instanceof ClientError)) throw error;
    io.err(`matchd: ${error.message}\n`);
    return error.exitCode;
  }
}

function watchOptions(positionals: string[], options: Record<string, unknown>, io: Io) {
  return {
    feedUrl: options["--feed-url"] as string,
    pairId: Number(positionals[0]),
    depth: options["--depth"] as number,
    once: options["--once"] === true,
    out: io.out,
    stopped: io.stopped,
  };
}

async function runParsed(
  key: string,
  positionals: string[],
  options: Record<string, unknown>,
  config: { brokerUrl: string; partition: number; partitionCount: number; httpToken: string },
  io: Io,
): Promise<number> {
  const json = options["--json"] === true;
  const stamp = { commandId: randomUUID(), orderId: randomUUID(), nowMs: Date.now() };
  switch (key) {
    case "order place":
    case "order cancel":
    case "order amend":
    case "order cancel-all":
    case "order oco":
    case "pair halt":
    case "pair resume":
    case "session cancel-after": {
      const envelope = commandOf(key, positionals, options, config, stamp);
      const wait = options["--no-wait"] !== true;
      const result = await sendCommand(envelope, {
        brokerUrl: config.brokerUrl,
        wait,
        timeoutMs: options["--timeout-ms"] as number,
        // The conductor executes a pair command only from a broker user it lists; the broker
        // lets a message name its connection's own user and no other.
        ...(key.startsWith("pair ") ? { userId: brokerUser(config.brokerUrl) } : {}),
      });
      if (result === null) {
        io.out(
          json
            ? `${JSON.stringify({ commandId: envelope.commandId })}\n`
            : `${envelope.commandId}\n`,
        );
        return ExitCode.ok;
      }
      return printResult(result, json, io);
    }
    case "book": {
      const pairId = Number(positionals[0]);
      const book = await fetchBook(
        options["--conductor-url"] as string,
        pairId,
        options["--depth"] as number,
      );
      io.out(json ? `${JSON.stringify(book)}\n` : bookLadder(pairId, book));
      return ExitCode.ok;
    }
    case "watch":
      return watchBook(watchOptions(positionals, options, io));
    case "result": {
      const url = options["--conductor-url"] as string;
      const result = await fetchResult(url, positionals[0]!, config.httpToken);
      return printResult(result, json, io);
    }
    default:
      return followEvents({
        brokerUrl: config.brokerUrl,
        follow: options["--follow"] === true,
        pairId: options["--pair"] as number | undefined,
        json,
        print: (line) => io.out(`${line}\n`),
        stopped: io.stopped,
      });
  }
}

/** The envelope a command line sends. */
function commandOf(
  key: string,
  positionals: string[],
  options: Record<string, unknown>,
  config: { partition: number; partitionCount: number },
  stamp: { commandId: string; orderId: string; nowMs: number },
): CommandEnvelope {
  const count = config.partitionCount;
  switch (key) {
    case "order place":
      return placeCommand(options as z.output<typeof placeSchema>, count, stamp);
    case "order cancel":
      return cancelCommand(positionals[0]!, options as z.output<typeof cancelSchema>, count, stamp);
    case "order amend":
      return amendCommand(options as z.output<typeof amendSchema>, count, stamp);
    case "order cancel-all":
      return cancelAllCommand(
        options as z.output<typeof cancelAllSchema>,
        config.partition,
        count,
        stamp,
      );
    case "order oco":
      return ocoCommand(options as z.output<typeof ocoSchema>, count, stamp);
    case "session cancel-after":
      return cancelAfterCommand(
        options as z.output<typeof cancelAfterSchema>,
        config.partition,
        count,
        stamp,
      );
    default:
      return pairCommand(
        key === "pair halt" ? "halt" : "resume",
        options as z.output<typeof pairSchema>,
        count,
        stamp,
      );
  }
}

/** A result on stdout; a rejection, for a person, as one line on stderr (exit 6). */
function printResult(result: CommandResult, json: boolean, io: Io): number {
  const rejected = result.status === "rejected";
  if (json) io.out(`${JSON.stringify(result)}\n`);
  else if (rejected) io.err(`matchd: ${resultLine(result)}\n`);
  else io.out(`${resultLine(result)}\n`);
  return rejected ? rejectedExitCode : ExitCode.ok;
}
