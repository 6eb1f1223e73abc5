/**
 * Bounded waiting: a promise's value, or undefined once a time limit passes. For calls that
 * depend on a server that may stop answering (a durability wait, a metrics refresh, a
 * close handshake), so the caller goes on instead of hanging.
 */

/**
 * `promise`'s value, or undefined when `ms` pass first. A rejection before the limit is passed
 * on (catch it first where a failure should count as done); one after it is ignored.
 */
export async function withinMs<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), Math.max(0, ms));
  });
  promise.catch(() => undefined);
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
