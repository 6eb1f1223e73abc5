// Process plumbing for the private local stack: detached spawning, liveness that
// survives pid reuse and unreaped zombies, free loopback ports, and bounded waits.
import { spawn } from "node:child_process";
import {
  accessSync,
  closeSync,
  constants,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
} from "node:fs";
import { createServer, type Server } from "node:net";

export type StackErrorCode =
  | "missing-binary"
  | "start-failed"
  | "timeout"
  | "stale-stack"
  | "stop-failed"
  | "busy"
  /** The stack was not started with --ha, or it has no node or sentinel of that name. */
  | "not-ha"
  /** A node to restart still runs. */
  | "node-running"
  /** No Sentinel of an --ha stack answered. */
  | "no-sentinel"
  /** rabbitmqctl or rabbitmq-queues failed against every live broker node of an --ha stack. */
  | "broker-cli"
  /** iptables could not add a partition's rule (it needs root and the iptables package). */
  | "partition";

/** An operating error of the local stack; `code` says which step failed. */
export class StackError extends Error {
  override readonly name = "StackError";
  constructor(
    readonly code: StackErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Children get a fixed, minimal environment rather than the caller's, so that a stray
 * RABBITMQ_* or ERL_* variable in the caller's shell cannot point a private server at
 * shared state. A UTF-8 locale keeps rabbitmqctl (Elixir) from warning on every call.
 */
const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
export const BASE_ENV: Record<string, string> = { PATH: SYSTEM_PATH, LANG: "C.UTF-8" };

export const SETUP_HINT = "run `npm run setup` (it installs the missing Debian packages)";

/** Finds an executable by name in SYSTEM_PATH, or checks an absolute path. */
export function findBinary(name: string): string | undefined {
  const candidates = name.startsWith("/")
    ? [name]
    : SYSTEM_PATH.split(":").map((d) => `${d}/${name}`);
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here; try the next directory.
    }
  }
  return undefined;
}

/** A started server process as the stack records it; `group` means it leads its own group. */
export interface RecordedProcess {
  name: string;
  pid: number;
  startTicks: number;
  group: boolean;
}

export interface DetachedChild {
  pid: number;
  /** Set once the child exits while this process still watches it. */
  exited: () => { code: number | null; signal: string | null } | undefined;
}

/**
 * Spawns a server in its own session and process group, with stdio going to a log file,
 * and unrefs it: the server must outlive the caller, which may be a compiled binary that
 * exits right after `stackUp` returns.
 */
export function spawnDetached(
  command: string,
  args: string[],
  { env, logFile, cwd }: { env: Record<string, string>; logFile: string; cwd: string },
): DetachedChild {
  const out = openSync(logFile, "a");
  let exit: { code: number | null; signal: string | null } | undefined;
  try {
    const child = spawn(command, args, {
      cwd,
      env,
      detached: true,
      stdio: ["ignore", out, out],
    });
    if (child.pid === undefined) {
      throw new StackError("start-failed", `could not spawn ${command}; see ${logFile}`);
    }
    child.on("exit", (code, signal) => {
      exit = { code, signal };
    });
    child.on("error", () => {
      exit ??= { code: null, signal: null };
    });
    child.unref();
    return { pid: child.pid, exited: () => exit };
  } finally {
    // The child holds its own copy of the descriptor; ours would only leak.
    closeSync(out);
  }
}

interface ProcStat {
  state: string;
  ppid: number;
  pgrp: number;
  startTicks: number;
  comm: string;
}

function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // comm may contain spaces and parentheses, so split after the last ")".
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  const fields = text.slice(close + 2).split(" ");
  return {
    comm: text.slice(open + 1, close),
    state: fields[0] ?? "?",
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    startTicks: Number(fields[19]),
  };
}

/** The kernel's start time of a process, used to tell a recorded pid from a reused one. */
export function processStartTicks(pid: number): number | undefined {
  return readStat(pid)?.startTicks;
}

/**
 * True while the process runs. A zombie counts as gone: in a container whose init does
 * not reap orphans, an exited server stays a zombie forever and kill(pid, 0) still
 * succeeds on it. With `startTicks`, a pid reused by another process also counts as gone.
 */
export function isRunning(pid: number, startTicks?: number): boolean {
  const stat = readStat(pid);
  if (stat === undefined || stat.state === "Z" || stat.state === "X") return false;
  return startTicks === undefined || stat.startTicks === startTicks;
}

/** Direct children of `pid` whose command name is `comm`. */
export function childrenNamed(pid: number, comm: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat && stat.ppid === pid && stat.comm === comm) found.push(Number(entry));
  }
  return found;
}

/**
 * Reserves `count` distinct free loopback ports by binding them all at once, then frees
 * them for the servers. They are drawn at random below the kernel's ephemeral range (port 0
 * would hand out one of those): an outgoing connection takes its local port from that range
 * at any moment, and one took a RabbitMQ node's distribution port between this reservation
 * and the node's start ("dist_port_already_used ... not_erlang"). Another process could still
 * bind one in between; the server then fails to start with its log.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  const [low, high] = unassignedPortRange();
  try {
    const ports: number[] = [];
    for (let tries = 0; ports.length < count; tries++) {
      // After many taken ports in a row, the kernel's choice, as before.
      const wanted = tries < 50 * count ? low + Math.floor(Math.random() * (high - low)) : 0;
      if (ports.includes(wanted)) continue;
      const server = createServer();
      const bound = await new Promise<boolean>((resolve) => {
        server.once("error", () => resolve(false));
        server.listen(wanted, "127.0.0.1", () => resolve(true));
      });
      if (!bound) continue;
      servers.push(server);
      const address = server.address();
      if (address === null || typeof address === "string") throw new Error("no port bound");
      ports.push(address.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

/** Ports from 10,000 up to the start of the kernel's ephemeral range (32,768 by default). */
function unassignedPortRange(): [number, number] {
  let ephemeralStart = 32_768;
  try {
    const first = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0],
    );
    if (Number.isInteger(first) && first > 11_000) ephemeralStart = first;
  } catch {
    // Not Linux: the default range.
  }
  return [10_000, ephemeralStart];
}

/** The last `lines` lines of a log file, or a note that it is missing. */
export function logTail(file: string, lines = 30): string {
  try {
    const text = readFileSync(file, "utf8").trimEnd().split("\n");
    return `--- ${file} (last ${Math.min(lines, text.length)} lines) ---\n${text.slice(-lines).join("\n")}`;
  } catch {
    return `--- ${file} (missing) ---`;
  }
}

/**
 * Polls `probe` until it returns a value, the child exits, or `timeoutMs` passes. Errors
 * from the probe mean "not ready yet"; the last one goes into the timeout message.
 */
export async function waitUntil<T>({
  what,
  probe,
  child,
  timeoutMs,
  intervalMs = 100,
  logs,
  stopped,
}: {
  what: string;
  probe: () => Promise<T | undefined>;
  child?: DetachedChild;
  timeoutMs: number;
  intervalMs?: number;
  logs: string[];
  /** Says why waiting is pointless (a server it needs is gone), or undefined to go on. */
  stopped?: () => string | undefined;
}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError = "";
  for (;;) {
    const gone = stopped?.();
    if (gone !== undefined) {
      throw new StackError(
        "start-failed",
        `${what}: ${gone}\n${logs.map((f) => logTail(f)).join("\n")}`,
      );
    }
    const exit = child?.exited();
    if (exit) {
      throw new StackError(
        "start-failed",
        `${what}: process exited (code ${exit.code}, signal ${exit.signal}) before it was ready\n` +
          logs.map((f) => logTail(f)).join("\n"),
      );
    }
    try {
      // A probe that never answers (e.g. a handshake with the wrong server on a port)
      // must not outlive the deadline.
      const remainingMs = Math.max(1, deadline - Date.now());
      let timer: ReturnType<typeof setTimeout> | undefined;
      const value = await Promise.race([
        probe(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`probe gave no answer in ${remainingMs} ms`)),
            remainingMs,
          );
        }),
      ]).finally(() => clearTimeout(timer));
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error instanceof Error ? error.message : String(error);
    }
    if (Date.now() >= deadline) {
      throw new StackError(
        "timeout",
        `${what}: not ready after ${timeoutMs} ms${lastError ? ` (last error: ${lastError})` : ""}\n` +
          logs.map((f) => logTail(f)).join("\n"),
      );
    }
    await Bun.sleep(intervalMs);
  }
}

/**
 * Every start settled before any failure is reported: a start still under way when the
 * caller stops what was spawned would spawn its server after that stop.
 */
export async function settleAll<T>(starts: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((s) => s.status === "rejected");
  if (failed !== undefined) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

/** Live (not zombie) processes in process group `pgid`, with their parents. */
function groupMembers(pgid: number): { pid: number; ppid: number }[] {
  const found: { pid: number; ppid: number }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat && stat.pgrp === pgid && stat.state !== "Z" && stat.state !== "X")
      found.push({ pid: Number(entry), ppid: stat.ppid });
  }
  return found;
}

/** `path` is `dir` or lies under it. */
function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

/**
 * This process and its ancestors: never taken for a stack's orphans, even when one names
 * the stack's directory on its command line (`matchd bench --dir D`).
 */
function ownLineage(): Set<number> {
  const lineage = new Set<number>();
  for (let pid = process.pid; pid > 1 && !lineage.has(pid); ) {
    lineage.add(pid);
    pid = readStat(pid)?.ppid ?? 0;
  }
  return lineage;
}

/**
 * Whether a process's working directory lies in `dir`, or an argument on its command line
 * names `dir` or a path under it (beam.smp names its home there).
 */
function belongsTo(pid: number, dir: string): boolean {
  // /proc shows real paths; the directory may have been given through a symlink.
  const dirs = [dir];
  try {
    const real = realpathSync(dir);
    if (real !== dir) dirs.push(real);
  } catch {
    // Gone: its given name is all there is.
  }
  const inDirs = (path: string) => dirs.some((d) => within(path, d));
  try {
    if (inDirs(readlinkSync(`/proc/${pid}/cwd`))) return true;
  } catch {
    // Gone, or not ours to read.
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").some(inDirs);
  } catch {
    return false;
  }
}

/**
 * True when `target`, a recorded group leader, is gone while its group still has members
 * that are provably its orphans: the leader is its own zombie (same start time), or, once
 * it was reaped, a member works in or names `owner` (the stack's directory). A group id
 * can be taken by an unrelated group once the leader's group emptied, so without such
 * proof a group is never adopted.
 */
function orphanedGroup(
  target: { pid: number; startTicks?: number },
  lineage: Set<number>,
  owner?: string,
): boolean {
  const stat = readStat(target.pid);
  const members = () => groupMembers(target.pid);
  if (stat === undefined) {
    if (owner === undefined) return false;
    const found = members();
    // Never a group this process (or one of its ancestors) is in.
    if (found.some((m) => lineage.has(m.pid))) return false;
    return found.some((m) => belongsTo(m.pid, owner));
  }
  const ownZombie =
    (stat.state === "Z" || stat.state === "X") &&
    target.startTicks !== undefined &&
    stat.startTicks === target.startTicks;
  return ownZombie && members().length > 0;
}

type StopTarget = { pid: number; startTicks?: number; group?: boolean };

/**
 * Which process groups have ended. A group seen empty twice, 50 ms or more apart (one walk of
 * /proc can miss a process forked meanwhile), is finished and never looked at again: its id
 * may then be reused by an unrelated group leader.
 */
class GroupEnds {
  readonly finished = new Set<number>();
  private readonly emptySince = new Map<number, number>();

  alive(t: StopTarget): boolean {
    if (t.group !== true || this.finished.has(t.pid)) return false;
    if (groupMembers(t.pid).length > 0) {
      this.emptySince.delete(t.pid);
      return true;
    }
    const since = this.emptySince.get(t.pid);
    if (since === undefined) {
      this.emptySince.set(t.pid, Date.now());
      return true;
    }
    if (Date.now() - since < 50) return true;
    this.finished.add(t.pid);
    return false;
  }
}

/**
 * A leader gone before its members: the top of what it left was never told to stop (its own
 * children follow it down, as they would have with the leader). Each is signalled once.
 */
function signalLeaderless(leader: number, lineage: Set<number>, signalled: Set<number>): void {
  const members = groupMembers(leader);
  const inGroup = new Set(members.map((m) => m.pid));
  for (const member of members) {
    if (inGroup.has(member.ppid) || signalled.has(member.pid)) continue;
    if (lineage.has(member.pid)) continue;
    signalled.add(member.pid);
    signal(member.pid, "SIGTERM");
  }
}

/**
 * Stops processes: SIGTERM to each, then SIGKILL to each survivor and its process group
 * after `graceMs`. A target marked `group` leads its own process group (it was spawned
 * detached), and it counts as stopped only when its whole group is gone: RabbitMQ's
 * wrapper script, signalled between starting beam.smp in the background and noting its
 * pid, exits and leaves the node running in its group. Such orphans are found even when
 * the leader was gone before the stop began (see orphanedGroup for the proof `owner`
 * gives). Returns the pids that were running (or whose orphans were) when asked to stop.
 */
export async function stopProcesses(
  targets: StopTarget[],
  graceMs: number,
  owner?: string,
): Promise<number[]> {
  // Groups whose leader is seen running are ours until they empty; a group adopted without
  // its leader is ours only while the proof holds, so it is checked again before each signal.
  const verified = new Set(targets.filter((t) => isRunning(t.pid, t.startTicks)).map((t) => t.pid));
  const lineage = ownLineage();
  const running = targets.filter(
    (t) => verified.has(t.pid) || (t.group === true && orphanedGroup(t, lineage, owner)),
  );
  const stillOurs = (t: StopTarget) => verified.has(t.pid) || orphanedGroup(t, lineage, owner);
  const groups = new GroupEnds();
  const alive = (t: StopTarget) => isRunning(t.pid, t.startTicks) || groups.alive(t);
  const orphansSignalled = new Set<number>();
  for (const t of running) signal(t.pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (running.some(alive) && Date.now() < deadline) {
    for (const leader of running) {
      if (leader.group !== true || groups.finished.has(leader.pid)) continue;
      if (isRunning(leader.pid, leader.startTicks)) continue;
      if (!stillOurs(leader)) groups.finished.add(leader.pid);
      else signalLeaderless(leader.pid, lineage, orphansSignalled);
    }
    await Bun.sleep(50);
  }
  const stubborn = running.filter(alive);
  for (const t of stubborn) {
    const killGroup =
      t.group === true &&
      !groups.finished.has(t.pid) &&
      stillOurs(t) &&
      !groupMembers(t.pid).some((m) => lineage.has(m.pid));
    if (killGroup) signal(-t.pid, "SIGKILL");
    if (isRunning(t.pid, t.startTicks)) signal(t.pid, "SIGKILL");
  }
  const killDeadline = Date.now() + 5000;
  while (stubborn.some(alive) && Date.now() < killDeadline) {
    await Bun.sleep(50);
  }
  const left = stubborn.filter(alive);
  if (left.length > 0) {
    throw new StackError(
      "stop-failed",
      `pids still running after SIGKILL: ${left.map((t) => t.pid).join(", ")}`,
    );
  }
  return running.map((t) => t.pid);
}

/**
 * Signals the process group a recorded leader leads (a server and any child it forked) and
 * the leader itself. The caller checks first that the leader runs with its recorded start
 * time, so that the group is not someone else's.
 */
export function signalGroup(pid: number, name: NodeJS.Signals): void {
  signal(-pid, name);
  signal(pid, name);
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone between the check and the signal.
  }
}
