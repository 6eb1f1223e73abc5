/**
 * A client command's failure as the one line a person reads, with its exit code: 1 when
 * the broker, the conductor or the datastore is not there, 6 when the command was rejected.
 */
export class ClientError extends Error {
  override readonly name = "ClientError";

  constructor(
    message: string,
    readonly exitCode: 1 | 6 = 1,
  ) {
    super(message);
  }
}

export const rejectedExitCode = 6;
