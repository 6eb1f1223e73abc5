/**
 * A client command's failure as the one line a person reads, with its exit code: 1 when
 * the broker, the conductor or the datastore is not there, 6 when the command was rejected.
 */
import { ExitCode } from "../../infra/exit-codes";

export class ClientError extends Error {
  override readonly name = "ClientError";

  constructor(
    message: string,
    readonly exitCode: typeof ExitCode.failure | typeof ExitCode.rejected = ExitCode.failure,
  ) {
    super(message);
  }
}

export const rejectedExitCode = ExitCode.rejected;
