/**
 * The life every bench run shares, whatever it starts (a stack of its own, several, or
 * services on one it was given): the services it registers, other stops it adds, and one
 * teardown, run once whoever asks first, the end of the run or a signal. After a signal
 * (Ctrl-C, kill, a closed terminal) the process ends with 130 once the teardown is done.
 */
import { ExitCode } from "../src/infra/exit-codes";
import type { ServiceProcess } from "./services";

/** The signals that end a bench run, after its teardown: Ctrl-C, kill, a closed terminal. */
export const benchSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

export class BenchLifecycle {
  private readonly services: ServiceProcess[] = [];
  private readonly stops: (() => Promise<unknown>)[] = [];
  private tearing: Promise<void> | undefined;
  private interrupted: Promise<void> | undefined;

  /**
   * `stopStacks`: what the run's own teardown adds after its services and stops (its stacks,
   * its directory), run once with them.
   */
  constructor(
    private readonly stopStacks: () => Promise<void>,
    private readonly progress: (line: string) => void,
  ) {}

  /** Tracks a service from its spawn; one spawned once the teardown began is stopped at once. */
  register = (service: ServiceProcess): void => {
    this.services.push(service);
    if (this.tearing !== undefined) void service.stop().catch(() => undefined);
  };

  /** A service the run stopped itself: the teardown has nothing left to stop of it. */
  forget(service: ServiceProcess): void {
    const at = this.services.indexOf(service);
    if (at >= 0) this.services.splice(at, 1);
  }

  /** Something to stop after the services and before the stacks. */
  onTeardown(stop: () => Promise<unknown>): void {
    this.stops.push(stop);
  }

  /** True once the teardown began (at the end, or at a signal). */
  get tornDown(): boolean {
    return this.tearing !== undefined;
  }

  /** True once a signal asked for the teardown. */
  get signalled(): boolean {
    return this.interrupted !== undefined;
  }

  /**
   * Listens for the signals. The stacks' servers run in sessions of their own, so a bench
   * ended without its teardown would leave them running; and `on`, not `once`: a second
   * Ctrl-C while the teardown runs must not end the process before it.
   */
  listen(): void {
    for (const signal of benchSignals) process.on(signal, this.onSignal);
  }

  stopListening(): void {
    for (const signal of benchSignals) process.off(signal, this.onSignal);
  }

  /** The teardown, started once; later calls wait for the same one. */
  teardown(): Promise<void> {
    this.tearing ??= this.stopEverything();
    return this.tearing;
  }

  /** Waits for a signal's teardown (the process then exits 130). */
  async afterSignal(): Promise<void> {
    await this.interrupted;
  }

  private readonly onSignal = (): void => {
    if (this.interrupted !== undefined) return;
    this.progress("interrupted; tearing down");
    this.interrupted = this.teardown().finally(() => process.exit(ExitCode.interrupted));
  };

  private async stopEverything(): Promise<void> {
    await this.stopServices();
    for (const stop of this.stops) await stop().catch(() => undefined);
    await this.stopStacks();
    // One spawned while the stacks stopped (a start cut short) is stopped too.
    await this.stopServices();
  }

  private async stopServices(): Promise<void> {
    // Drained, not copied: a service registers itself as soon as it is spawned.
    while (this.services.length > 0) {
      const stopping = this.services.splice(0);
      await Promise.all(stopping.map((service) => service.stop().catch(() => undefined)));
    }
  }
}
