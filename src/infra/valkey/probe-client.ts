/**
 * A short-lived ioredis client for one question to one node (a Sentinel, a cluster seed):
 * it connects when asked, never retries, and gives up on a connect or a command after 1 s.
 */
import Redis from "ioredis";

export interface ProbeTarget {
  host: string;
  port: number;
  /** Left out when undefined, as a URL without them leaves them. */
  username?: string | undefined;
  password?: string | undefined;
}

export function probeClient({ host, port, username, password }: ProbeTarget): Redis {
  const client = new Redis({
    host,
    port,
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    lazyConnect: true,
    connectTimeout: 1000,
    commandTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // The awaited connect or command reports the failure; the event would only be unhandled.
  client.on("error", () => undefined);
  return client;
}
