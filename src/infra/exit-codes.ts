/**
 * Every exit code matchd gives, declared once: the services, the client commands and the
 * bench return these, `matchd --help` prints them, and docs/operations.md lists them.
 */
export const ExitCode = {
  ok: 0,
  /** A runtime failure, a failed bench invariant, or a server a client command needs is not there. */
  failure: 1,
  /** A usage or configuration error: every problem listed, nothing started. */
  usage: 2,
  /** The datastore cannot honour the durability policy. */
  policyRefused: 3,
  /** A conductor fenced by a newer owner of its partition. */
  fenced: 4,
  /** The broker refused the credentials or the vhost: fatal at boot, never retried. */
  brokerRefused: 5,
  /** A client command whose command was rejected. */
  rejected: 6,
  /** A conductor halted by a broken matching invariant: a bug, its batch left in the queue. */
  halted: 7,
  /** A bench interrupted by Ctrl-C, SIGTERM or SIGHUP. */
  interrupted: 130,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** The table as `--help` prints it. */
export const exitCodeLines: readonly string[] = [
  `${ExitCode.ok} success`,
  `${ExitCode.failure} a runtime failure, a failed bench invariant, or a server a client command needs is not there`,
  `${ExitCode.usage} a usage or configuration error (nothing started)`,
  `${ExitCode.policyRefused} the datastore cannot honour the durability policy`,
  `${ExitCode.fenced} a conductor fenced by a newer owner of its partition`,
  `${ExitCode.brokerRefused} the broker refused the credentials or the vhost`,
  `${ExitCode.rejected} a client command's command was rejected`,
  `${ExitCode.halted} a conductor halted by a broken matching invariant`,
  `${ExitCode.interrupted} a bench interrupted`,
];
