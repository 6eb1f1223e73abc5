/**
 * The client commands (`order place|cancel`, `book`, `result`, `events`): their flags and
 * the shared settings resolved at once (every problem listed, nothing sent), then one
 * command run, its outcome printed for a person or, with --json, for a script.
 */
import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { clientSettingsRead } from "../../config/flag-scope";
import { resolveConfig } from "../../config/resolve";
import { configFlags } from "../../config/schema";
import type { CommandEnvelope, CommandResult } from "../../domain/index";
import { parseArgs } from "../args";
import { ClientError, rejectedExitCode } from "./client-error";
import { cancelCommand, placeCommand } from "./commands";
import { followEvents } from "./events";
import { bookLadder, resultLine } from "./format";
import {
  bookSchema,
  cancelSchema,
  eventsSchema,
  flagsOf,
  parseOptions,
  placeSchema,
  resultSchema,
} from "./options";
import { fetchBook, fetchResult } from "./queries";
import { sendCommand } from "./rpc";
import { clientUsage } from "./usage";

interface Io {
  env: Readonly<Record<string, string | undefined>>;
  out: (text: string) => void;
  err: (text: string) => void;
  /** Resolves at SIGINT or SIGTERM. */
  stopped: Promise<unknown>;
}

const schemaOf = (command: string, action: string | undefined): z.ZodType | undefined =>
  command === "order"
    ? action === "place"
      ? placeSchema
      : action === "cancel"
        ? cancelSchema
        : undefined
    : { book: bookSchema, result: resultSchema, events: eventsSchema }[command];

/** Positionals each command takes after its name (and after order's action). */
const positionalsOf: Record<string, string[]> = {
  "order place": [],
  "order cancel": ["ORDER_ID"],
  book: ["PAIR"],
  result: ["COMMAND_ID"],
  events: [],
};

export async function runClient(command: string, argv: string[], io: Io): Promise<number> {
  const usage = clientUsage[command]!;
  const action = command === "order" ? argv[0] : undefined;
  const rest = command === "order" ? argv.slice(1) : argv;
  if (argv.includes("--help") || argv.includes("-h")) {
    io.out(usage);
    return 0;
  }
  const schema = schemaOf(command, action);
  if (schema === undefined) {
    io.err(`matchd: order needs place or cancel\n\n${usage}`);
    return 2;
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
    ...(command === "book" &&
    args.positionals[0] !== undefined &&
    !/^[1-9]\d{0,15}$/.test(args.positionals[0])
      ? [`PAIR: not a positive integer (got ${JSON.stringify(args.positionals[0])})`]
      : []),
  ];
  if (problems.length > 0 || !resolved.ok || !parsed.ok) {
    io.err(
      `matchd: invalid command line or configuration, nothing sent:\n${problems.map((p) => `  - ${p}`).join("\n")}\n\n${usage}`,
    );
    return 2;
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

async function runParsed(
  key: string,
  positionals: string[],
  options: Record<string, unknown>,
  config: { brokerUrl: string; partitionCount: number; httpToken: string },
  io: Io,
): Promise<number> {
  const json = options["--json"] === true;
  const stamp = { commandId: randomUUID(), orderId: randomUUID(), nowMs: Date.now() };
  switch (key) {
    case "order place":
    case "order cancel": {
      const envelope: CommandEnvelope =
        key === "order place"
          ? placeCommand(options as z.output<typeof placeSchema>, config.partitionCount, stamp)
          : cancelCommand(
              positionals[0]!,
              options as z.output<typeof cancelSchema>,
              config.partitionCount,
              stamp,
            );
      const wait = options["--no-wait"] !== true;
      const result = await sendCommand(envelope, {
        brokerUrl: config.brokerUrl,
        wait,
        timeoutMs: options["--timeout-ms"] as number,
      });
      if (result === null) {
        io.out(
          json
            ? `${JSON.stringify({ commandId: envelope.commandId })}\n`
            : `${envelope.commandId}\n`,
        );
        return 0;
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
      return 0;
    }
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

/** A result on stdout; a rejection, for a person, as one line on stderr (exit 6). */
function printResult(result: CommandResult, json: boolean, io: Io): number {
  const rejected = result.status === "rejected";
  if (json) io.out(`${JSON.stringify(result)}\n`);
  else if (rejected) io.err(`matchd: ${resultLine(result)}\n`);
  else io.out(`${resultLine(result)}\n`);
  return rejected ? rejectedExitCode : 0;
}
