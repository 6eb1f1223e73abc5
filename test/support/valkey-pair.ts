/**
 * A private Valkey primary + replica with AOF in a fresh temp directory, for tests that
 * pause, stop or fill the datastore without touching the shared stack.
 */
import { join } from "node:path";
import { type RunningValkey, startValkey } from "../../src/stack/index";
import { waitForReplicatedAof } from "../../src/stack/valkey";
import { tempDir } from "./temp-dir";

export interface ValkeyPair {
  primary: RunningValkey;
  replica: RunningValkey;
  /** Starts the replica again in its directory (on `port`, e.g. its old one) after a stop. */
  restartReplica(port?: number): Promise<RunningValkey>;
  /** Starts the primary again in its directory (its AOF reloaded) on `port` after a stop. */
  restartPrimary(port: number): Promise<RunningValkey>;
}

/** Starts both servers and waits until the replica's AOF follows the primary's. */
export async function startValkeyPair(prefix: string): Promise<ValkeyPair> {
  const dir = tempDir(prefix);
  const primary = await startValkey({ dir: join(dir, "primary"), appendonly: true });
  const replicaOptions = {
    dir: join(dir, "replica"),
    appendonly: true,
    replicaOf: `127.0.0.1:${primary.port}`,
  };
  let replica: RunningValkey | undefined;
  try {
    replica = await startValkey(replicaOptions);
    await waitForReplicatedAof(primary, replica, 20_000);
  } catch (error) {
    // The caller never sees the servers, so a half-started pair is stopped here.
    await replica?.stop().catch(() => undefined);
    await primary.stop().catch(() => undefined);
    throw error;
  }
  return {
    primary,
    replica,
    restartReplica: (port) => startValkey({ ...replicaOptions, port }),
    restartPrimary: (port) => startValkey({ dir: join(dir, "primary"), appendonly: true, port }),
  };
}
