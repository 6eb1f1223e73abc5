/**
 * A bench run on one stack, as an `await using` resource: a private stack in a fresh
 * directory (or --dir, or the URLs given), on the lifecycle every run shares
 * (bench-lifecycle.ts: services, one teardown at the end or at a signal). The teardown
 * decides whether the directory is kept.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Config } from "../src/config/schema";
import { withinMs } from "../src/infra/within";
import { stackDown, stackStatus } from "../src/stack/index";
import { BenchLifecycle } from "./bench-lifecycle";
import { type BenchStack, ensureStack, type ServiceProcess } from "./services";

export interface StackRunOptions {
  config: Config;
  env: { datastoreGiven: boolean; brokerGiven: boolean };
  flags: ReadonlyMap<string, string>;
  keepStack: boolean;
  progress: (line: string) => void;
}

export class StackRun implements AsyncDisposable {
  private readonly life: BenchLifecycle;
  private stack: BenchStack | undefined;
  private starting: Promise<BenchStack> | undefined;
  /** Cleared once a report's invariants held: its directory then goes. */
  private keepDirForLogs = true;
  private readonly ownDir: string | undefined;
  private readonly madeDir: boolean;
  private startingFresh = false;

  private constructor(private readonly options: StackRunOptions) {
    // A private stack this run starts in a fresh directory: an interrupt while it is still
    // starting stops whatever of it runs already (stack.json lists each process as it starts).
    const { env, flags } = options;
    this.ownDir =
      env.datastoreGiven || env.brokerGiven
        ? undefined
        : (flags.get("--dir") ?? mkdtempSync(join(tmpdir(), "matchd-bench-")));
    // A directory this run made (not --dir) goes once its stack is stopped: each run's AOF
    // files and broker data took ~35 MB of /tmp.
    this.madeDir = this.ownDir !== undefined && flags.get("--dir") === undefined;
    this.life = new BenchLifecycle(() => this.stopStack(), options.progress);
  }

  /**
   * Starts (or reuses) the stack, listening for signals from before the start: RabbitMQ takes
   * seconds to boot, and a Ctrl-C then would otherwise leave its detached servers running.
   * Returns the run, or "interrupted" once a signal's teardown is done (exit 130).
   */
  static async open(options: StackRunOptions): Promise<StackRun | "interrupted"> {
    const run = new StackRun(options);
    const dir = run.ownDir;
    // Fresh unless a stack recorded in the directory still runs (one that was stopped is
    // started again by this run, and is this run's to stop).
    run.startingFresh =
      dir !== undefined &&
      (!existsSync(join(dir, "stack.json")) ||
        !(await stackStatus(dir)).processes.some((p) => p.running));
    run.life.listen();
    try {
      run.starting = ensureStack({
        config: options.config,
        datastoreGiven: options.env.datastoreGiven,
        brokerGiven: options.env.brokerGiven,
        dir,
        keep: options.keepStack,
        progress: options.progress,
      });
      run.stack = await run.starting;
    } catch (error) {
      // Stopping a stack that is still starting makes its start fail: that is the interrupt.
      if (run.life.signalled) return await run.closeInterrupted();
      if (run.madeDir) options.progress(`the private stack's logs are kept in ${dir}`);
      run.life.stopListening();
      throw error;
    }
    if (run.life.signalled) return await run.closeInterrupted();
    return run;
  }

  get datastoreUrl(): string {
    return this.stack!.datastoreUrl;
  }

  get brokerUrl(): string {
    return this.stack!.brokerUrl;
  }

  /** True once a signal tore the run down: its figures are not a report. */
  get tornDown(): boolean {
    return this.life.tornDown;
  }

  /** Tracks a service from its spawn; one spawned once the teardown began is stopped at once. */
  register = (service: ServiceProcess): void => this.life.register(service);

  /** A service the run stopped itself: the teardown has nothing left to stop of it. */
  forget(service: ServiceProcess): void {
    this.life.forget(service);
  }

  /** A report whose invariants held lets a directory this run made go with its stack. */
  reportHeld(ok: boolean): void {
    this.keepDirForLogs = !ok;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      // Still listening while the teardown runs: a Ctrl-C now must not end the process first.
      await this.life.teardown();
      // A signal ends the process with 130 once the teardown is done.
      if (this.life.signalled) await this.life.afterSignal();
    } finally {
      this.life.stopListening();
    }
  }

  private async closeInterrupted(): Promise<"interrupted"> {
    await this.life.afterSignal();
    this.life.stopListening();
    return "interrupted";
  }

  /** After the services: the stack, then the directory this run made. */
  private async stopStack(): Promise<void> {
    const { progress } = this.options;
    const logStop = (error: unknown) => progress(`stopping the stack: ${error}`);
    if (this.stack !== undefined) {
      await this.stack.teardown().catch(logStop);
    } else if (this.startingFresh && this.ownDir !== undefined) {
      await this.stopCutShortStart(this.ownDir, logStop);
    }
    const stackKept = this.stack !== undefined && this.options.keepStack;
    if (this.madeDir && !stackKept) {
      // (keepDirForLogs is cleared only once the start succeeded: no start can still be
      // spawning servers into the directory then.)
      if (this.keepDirForLogs) progress(`the private stack's logs are kept in ${this.ownDir}`);
      else await removeStoppedStackDir(this.ownDir!, progress);
    }
  }

  /**
   * A start cut short (even with --keep-stack: a stack that never came up is not kept). A
   * start still running can spawn (and record) more servers after a stop read the record,
   * e.g. the replica once the primary answered: stopped again every second until the start
   * settles (its waits end soon once a server it needs is gone).
   */
  private async stopCutShortStart(dir: string, logStop: (error: unknown) => void): Promise<void> {
    await stackDown({ dir }).catch(logStop);
    const settled = this.starting?.then(
      () => true,
      () => true,
    );
    const deadline = Date.now() + 60_000;
    while (settled !== undefined && Date.now() < deadline) {
      const done = (await withinMs(settled, 1000)) === true;
      await stackDown({ dir }).catch(logStop);
      if (done) break;
    }
  }
}

/** Removes a private stack's directory once nothing recorded in it runs any more. */
async function removeStoppedStackDir(dir: string, progress: (line: string) => void): Promise<void> {
  const status = await stackStatus(dir).catch(() => undefined);
  if (status === undefined || status.processes.some((p) => p.running)) {
    progress(`left ${dir} in place: part of its stack may still run`);
    return;
  }
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch (error) {
    // The run's report stands; a directory left behind is not worth its exit status.
    progress(`could not remove ${dir}: ${(error as Error).message}`);
  }
}
