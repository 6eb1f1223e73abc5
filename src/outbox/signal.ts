/**
 * A tiny wake-up primitive for the delivery loop: waits that end early when something
 * changes (a confirm arrived, the lease was lost, shutdown was asked for).
 */

export class Wakeup {
  private waiters: (() => void)[] = [];

  /** Resolves on the next `wake()`, or after `timeoutMs` when given. */
  wait(timeoutMs?: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.waiters.push(done);
      if (timeoutMs !== undefined) timer = setTimeout(done, Math.max(0, timeoutMs));
    });
  }

  wake(): void {
    for (const done of this.waiters.splice(0)) done();
  }
}
