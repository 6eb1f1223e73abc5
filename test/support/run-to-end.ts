// Runs a child process to its end and collects what it printed: how tests run a command
// whose exit code and output they check (servers they keep running use spawnMatchd instead).

export interface Finished {
  stdout: string;
  stderr: string;
  code: number;
}

export async function runToEnd(
  argv: string[],
  {
    cwd,
    env = process.env,
    killAfterMs,
  }: {
    cwd?: string;
    env?: Record<string, string | undefined>;
    /** SIGKILL after this long, so a hung child fails its test instead of the whole run. */
    killAfterMs?: number;
  } = {},
): Promise<Finished> {
  const child = Bun.spawn(argv, { cwd, env, stdout: "pipe", stderr: "pipe" });
  const timer =
    killAfterMs === undefined ? undefined : setTimeout(() => child.kill("SIGKILL"), killAfterMs);
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  clearTimeout(timer);
  return { stdout, stderr, code };
}
