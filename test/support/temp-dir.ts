/**
 * Fresh directories under the system's temp dir for tests' private servers and files, removed
 * after the last test file (teardown.ts): each stack's AOF files and broker data take tens of
 * MB, and every run of the suite used to leave them all in /tmp.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made: string[] = [];

/** Removes every directory tempDir() made (bun test runs no 'exit' handler of a test file). */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A new directory named `<prefix>XXXXXX` under the temp dir, removed after the last test file. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
