// Polls a condition until it holds or a deadline passes: the one way integration tests
// wait for something a real server or child process does on its own time.

export async function eventually(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 15_000,
  detail: () => string | Promise<string> = () => "",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what} ${await detail()}`);
    await Bun.sleep(25);
  }
}
