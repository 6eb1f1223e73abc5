/**
 * MATCHING_BROKER_URL may list the nodes of one RabbitMQ cluster, comma-separated: every
 * connection goes to the first node that answers, starting from the last one that did, so a
 * process moves to a live node when its own dies.
 */

/** The URLs of a broker setting, in the order given. */
export function brokerUrls(setting: string): string[] {
  return setting
    .split(",")
    .map((url) => url.trim())
    .filter((url) => url !== "");
}

/** Per setting, the index of the node that answered last: the next connection starts there. */
const lastAnswered = new Map<string, number>();

/**
 * Tries each node in turn (from the last that answered) and returns the first connection;
 * `fatal` errors (a refused login: the same on every node of a cluster) are thrown at once,
 * any other from the last node tried.
 */
export async function connectToFirstAnswering<T>(
  setting: string,
  connect: (url: string) => Promise<T>,
  fatal: (error: unknown) => boolean,
): Promise<T> {
  const urls = brokerUrls(setting);
  const start = lastAnswered.get(setting) ?? 0;
  let last: unknown = new Error("no broker URL given");
  for (let k = 0; k < urls.length; k++) {
    const index = (start + k) % urls.length;
    try {
      const connection = await connect(urls[index]!);
      lastAnswered.set(setting, index);
      return connection;
    } catch (error) {
      if (fatal(error)) throw error;
      last = error;
      // The next connection starts past a node that did not answer.
      lastAnswered.set(setting, (index + 1) % urls.length);
    }
  }
  throw last;
}
