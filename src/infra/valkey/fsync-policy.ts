/**
 * The boot checks of `aof-replicated` that INFO cannot answer: `appendfsync always` on the
 * primary and on every replica it lists (read with CONFIG GET), and AOF on each replica.
 */

import type { Valkey } from "./client";
import { parseInfo } from "./client";
import type { CheckOutcome } from "./durability";

/** A replica as the primary's INFO replication lists it (`slave0:ip=…,port=…,state=…`). */
export interface ListedReplica {
  ip: string;
  port: number;
  state: string;
  /** Seconds since the replica's last acknowledgement (it sends one every second). */
  lag: number;
}

export function listedReplicas(replication: Map<string, string>): ListedReplica[] {
  const replicas: ListedReplica[] = [];
  for (const [key, value] of replication) {
    if (!/^slave\d+$/.test(key)) continue;
    const fields = new Map(value.split(",").map((pair) => pair.split("=") as [string, string]));
    const port = Number(fields.get("port"));
    const ip = fields.get("ip");
    if (ip !== undefined && Number.isInteger(port)) {
      const lag = Number(fields.get("lag") ?? Number.NaN);
      replicas.push({ ip, port, state: fields.get("state") ?? "unknown", lag });
    }
  }
  return replicas;
}

/** CONFIG GET appendfsync; throws when CONFIG is denied or renamed. */
export async function appendfsyncOf(valkey: Valkey): Promise<string> {
  const reply = (await valkey.call("CONFIG", "GET", "appendfsync")) as string[];
  const value = reply[1];
  if (value === undefined) throw new Error("CONFIG GET appendfsync returned nothing");
  return value;
}

const grantHint = "this user needs +config|get to show the setting";

/** Why a replica could not be asked, and what would let the check see it next time. */
function unaskedAdvice(cause: Error): string {
  const reason = cause.message.replace(/\.$/, "");
  if (/WRONGPASS|NOAUTH|NOPERM/.test(reason)) {
    return `the replica refused the primary's credentials (${reason}); create the same user, with +config|get, on every replica (ACL users are not replicated)`;
  }
  return `the replica could not be reached at the address the primary lists (${reason}); set replica-announce-ip and replica-announce-port on it to an address clients reach`;
}

/**
 * WAITAOF alone is not enough: under `everysec` some server versions count an offset as
 * fsynced before it is (redis/redis#13793), so an acknowledged command could be lost on power
 * loss. A server that will not show its setting fails the check: the policy cannot be shown.
 */
export async function checkPrimaryFsync(valkey: Valkey): Promise<CheckOutcome> {
  const name = "appendfsync always on the primary";
  try {
    const value = await appendfsyncOf(valkey);
    return {
      name,
      ok: value === "always",
      detail:
        value === "always"
          ? "appendfsync always"
          : `appendfsync is ${value}; set \`appendfsync always\` on primary and replica`,
    };
  } catch (error) {
    return {
      name,
      ok: false,
      detail: `could not be checked: ${(error as Error).message}; ${grantHint}`,
    };
  }
}

/**
 * Connects to each listed replica with the primary's credentials and checks AOF and
 * `appendfsync always` there: WAITAOF counts any replica's fsync, so each one must qualify.
 * A setting seen wrong fails the check. A replica that cannot be asked (its listed address is
 * not reachable from here, or it refuses the primary's credentials: ACL users are not
 * replicated) passes with a warning: the probe's WAITAOF still proves a replica's AOF took
 * the write, and refusing to boot there would make a replica's network or ACL setup a
 * condition of the primary's service.
 */
export async function checkReplicasFsync(
  valkey: Valkey,
  replicas: ListedReplica[],
): Promise<CheckOutcome[]> {
  return Promise.all(
    replicas.map(async ({ ip, port }) => {
      const name = `replica ${ip}:${port} appendonly yes, appendfsync always`;
      const replica = valkey.duplicate({
        host: ip,
        port,
        connectionName: "matchd-check-replica",
        lazyConnect: true,
        connectTimeout: 2000,
        commandTimeout: 2000,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      // The server's own reason (WRONGPASS, ECONNREFUSED) arrives as an 'error' event; the
      // rejected connect or command then says only "Connection is closed".
      let cause: Error | undefined;
      replica.on("error", (error: Error) => {
        cause ??= error;
      });
      try {
        await replica.connect();
        const aofOn = parseInfo(await replica.info("persistence")).get("aof_enabled") === "1";
        const value = await appendfsyncOf(replica);
        const problems = [
          ...(aofOn ? [] : ["appendonly is off"]),
          ...(value === "always" ? [] : [`appendfsync is ${value}`]),
        ];
        return {
          name,
          ok: problems.length === 0,
          detail:
            problems.length === 0
              ? "appendonly yes, appendfsync always"
              : `${problems.join(", ")}; set \`appendonly yes\` and \`appendfsync always\` on every replica`,
        };
      } catch (error) {
        return {
          name,
          ok: true,
          warning: true,
          detail: `not verified: ${unaskedAdvice(cause ?? (error as Error))}`,
        };
      } finally {
        replica.disconnect();
      }
    }),
  );
}
