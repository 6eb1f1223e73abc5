/**
 * A bench run that starts its own stacks (failover, ha-cost, soak, cells): a directory
 * (--dir, or a fresh temp one) and the stacks in it, on the lifecycle every run shares
 * (bench-lifecycle.ts: services, stops, one teardown, signals). The stacks are stopped unless
 * --keep-stack; a temp directory is removed after a run whose invariants held, and kept (and
 * named) else.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Config } from "../src/config/schema";
import { stackDown } from "../src/stack/index";
import { BenchLifecycle } from "./bench-lifecycle";
import type { ServiceProcess } from "./services";

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
  private readonly life: BenchLifecycle;
  /** The stacks' directories: `dir` itself unless the run names others inside it. */
  private stackDirs: string[];
  /** Whether the run's invariants held: its temp directory then goes with its stacks. */
  private held = false;

  constructor(
    private readonly options: Pick<OwnBenchOptions, "flags" | "keepStack" | "progress">,
    prefix: string,
  ) {
    const given = options.flags.get("--dir");
    this.given = given !== undefined;
    this.dir = given ?? mkdtempSync(join(tmpdir(), `matchd-${prefix}-`));
    this.stackDirs = [this.dir];
    this.life = new BenchLifecycle(() => this.stopStacks(), options.progress);
  }

  /** The run keeps several stacks, each in its own folder of `dir`. */
  stacksIn(...names: string[]): string[] {
    this.stackDirs = names.map((name) => join(this.dir, name));
    return this.stackDirs;
  }

  register = (service: ServiceProcess): void => this.life.register(service);

  /** Something to stop before the stacks: a server started outside the stack's record. */
  onTeardown(stop: () => Promise<unknown>): void {
    this.life.onTeardown(stop);
  }

  /**
   * Runs `body` (an exit code: 0 when every invariant held), tearing down at the end or at a
   * signal (exit 130).
   */
  async run(body: () => Promise<number>): Promise<number> {
    let code = 1;
    this.life.listen();
    try {
      code = await body();
      if (code !== 0 || this.options.keepStack)
        this.options.progress(`the run's directory is kept: ${this.dir}`);
      return code;
    } finally {
      // A signal's teardown started already keeps the directory, whatever the body returned.
      if (!this.life.tornDown) this.held = code === 0;
      await this.life.teardown();
      if (this.life.signalled) await this.life.afterSignal();
      this.life.stopListening();
    }
  }

  private async stopStacks(): Promise<void> {
    if (this.options.keepStack) return;
    for (const dir of this.stackDirs) await stackDown({ dir }).catch(() => undefined);
    if (!this.given && this.held) rmSync(this.dir, { recursive: true, force: true });
  }
}
