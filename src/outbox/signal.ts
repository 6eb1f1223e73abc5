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
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () => {
            // A wait that times out leaves the list: a standby that is never woken would
            // otherwise keep one closure per wait for as long as it runs.
            const at = this.waiters.indexOf(done);
            if (at >= 0) this.waiters.splice(at, 1);
            resolve();
          },
          Math.max(0, timeoutMs),
        );
      }
    });
  }

  /** Waits not yet resolved (for tests: a timed-out wait must not stay listed). */
  get waiting(): number {
    return this.waiters.length;
  }

  wake(): void {
    for (const done of this.waiters.splice(0)) done();
  }
}
