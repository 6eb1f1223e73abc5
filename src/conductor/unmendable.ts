/**
 * Which batch failures a retry cannot mend. A batch is retried after any failure, but one that
 * fails the same way every time (the engine throwing on a command, a commit script refused for
 * what the data holds) would be retried for ever, holding up every command behind it: the
 * conductor halts the partition on those instead, as on a broken invariant.
 */
import { ReplyError } from "ioredis";
import { MatchingInvariantError } from "../domain/index";
import { replyCode } from "../infra/valkey/client";

/** An exception from the engine that is not a broken invariant: a bug all the same. */
export class CommandFaultError extends MatchingInvariantError {
  constructor(commandId: string, cause: unknown) {
    super(
      `the engine threw on command ${commandId}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.commandId = commandId;
  }
}

/**
 * Server replies that a retry can outlast: a failover or restart under way, a full or busy
 * server, a cluster moving slots. Any other error reply (WRONGTYPE in a script, a script
 * error, an ACL refusal) comes back the same on every retry.
 */
const transientReplies = new Set([
  "READONLY",
  "LOADING",
  "MASTERDOWN",
  "NOREPLICAS",
  "OOM",
  "BUSY",
  "TRYAGAIN",
  "CLUSTERDOWN",
  "MOVED",
  "ASK",
  "NOSCRIPT",
  "UNBLOCKED",
]);

/** A server's error reply, as ioredis gives it. */
export type ServerReplyError = InstanceType<typeof ReplyError>;

/** True for a datastore error reply that every retry of the batch would get again. */
export function unmendableReply(error: unknown): error is ServerReplyError {
  if (!(error instanceof ReplyError)) return false;
  const message = (error as Error).message;
  // Inside a script, a command's own error comes after the script's name: "ERR user_script:…
  // OOM command not allowed…" is a full server still.
  if (/\b(OOM|BUSY|READONLY|LOADING|MASTERDOWN|NOREPLICAS)\b/.test(message)) return false;
  return !transientReplies.has(replyCode(error) ?? "");
}
