/**
 * The life of a bench run that starts its own stacks and services (failover, ha-cost, soak):
 * a directory (--dir, or a fresh temp one), the services it registers, other stops it adds,
 * and one teardown, at the end or at Ctrl-C. The stacks in it are stopped unless --keep-stack;
 * a temp directory is removed after a run whose invariants held, and kept (and named) else.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Config } from "../src/config/schema";
import { ExitCode } from "../src/infra/exit-codes";
import { stackDown } from "../src/stack/index";
import type { ServiceProcess } from "./services";
import { benchSignals } from "./stack-run";

/** What runBench hands a boundary that runs on its own stacks. */
export interface OwnBenchOptions {
  config: Config;
  flags: ReadonlyMap<string, string>;
  json: boolean;
  keepStack: boolean;
  progress: (line: string) => void;
}

export class OwnRun {
  readonly dir: string;
  private readonly given: boolean;
  private readonly services: ServiceProcess[] = [];
  private readonly stops: (() => Promise<unknown>)[] = [];
  /** The stacks' directories: `dir` itself unless the run names others inside it. */
  private stackDirs: string[];

  constructor(
    private readonly options: Pick<OwnBenchOptions, "flags" | "keepStack" | "progress">,
    prefix: string,
  ) {
    const given = options.flags.get("--dir");
    this.given = given !== undefined;
    this.dir = given ?? mkdtempSync(join(tmpdir(), `matchd-${prefix}-`));
    this.stackDirs = [this.dir];
  }

  /** The run keeps several stacks, each in its own folder of `dir`. */
  stacksIn(...names: string[]): string[] {
    this.stackDirs = names.map((name) => join(this.dir, name));
    return this.stackDirs;
  }

  register = (service: ServiceProcess): void => {
    this.services.push(service);
  };

  /** Something to stop before the stacks: a server started outside the stack's record. */
  onTeardown(stop: () => Promise<unknown>): void {
    this.stops.push(stop);
  }

  /**
   * Runs `body` (an exit code: 0 when every invariant held), tearing down at the end or at a
   * signal (exit 130). SIGTERM and SIGHUP too: the stacks' servers run in sessions of their
   * own, so a bench killed without its teardown would leave them running.
   */
  async run(body: () => Promise<number>): Promise<number> {
    let code = 1;
    let tearingDown: Promise<void> | undefined;
    // `on`, not `once`: a second signal during the teardown must not end the process first.
    const interrupted = () => {
      tearingDown ??= this.teardown(false).then(() => process.exit(ExitCode.interrupted));
    };
    for (const signal of benchSignals) process.on(signal, interrupted);
    try {
      code = await body();
      if (code !== 0 || this.options.keepStack)
        this.options.progress(`the run's directory is kept: ${this.dir}`);
      return code;
    } finally {
      for (const signal of benchSignals) process.off(signal, interrupted);
      await (tearingDown ?? this.teardown(code === 0));
    }
  }

  private async teardown(held: boolean): Promise<void> {
    await Promise.all(this.services.map((s) => s.stop().catch(() => 1)));
    for (const stop of this.stops) await stop().catch(() => undefined);
    if (this.options.keepStack) return;
    for (const dir of this.stackDirs) await stackDown({ dir }).catch(() => undefined);
    if (!this.given && held) rmSync(this.dir, { recursive: true, force: true });
  }
}
