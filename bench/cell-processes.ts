/**
 * What the OS says about a cell's processes: their descendants, the CPUs each may run on
 * (Cpus_allowed_list, read back from /proc) and the CPU time each has used, so a cells
 * report shows rather than asserts that no two cells shared a core.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks a second for /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

export interface ProcessFacts {
  pid: number;
  name: string;
  cpusAllowed: string;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** Every live process with its parent, from /proc. */
function parents(): Map<number, number> {
  const map = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const status = readText(`/proc/${entry}/status`);
    const ppid = status?.match(/^PPid:\s+(\d+)/m)?.[1];
    if (ppid !== undefined) map.set(Number(entry), Number(ppid));
  }
  return map;
}

/** The given processes and all their live descendants. */
export function withDescendants(roots: readonly number[]): number[] {
  const parentOf = parents();
  const found = new Set(roots.filter((pid) => parentOf.has(pid)));
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, ppid] of parentOf) {
      if (!found.has(pid) && found.has(ppid)) {
        found.add(pid);
        grew = true;
      }
    }
  }
  return [...found].sort((a, b) => a - b);
}

/** Name and allowed CPUs of each live process of `pids`. */
export function processFacts(pids: readonly number[]): ProcessFacts[] {
  const facts: ProcessFacts[] = [];
  for (const pid of pids) {
    const status = readText(`/proc/${pid}/status`);
    if (status === undefined) continue;
    facts.push({
      pid,
      name: status.match(/^Name:\s+(.*)$/m)?.[1] ?? "?",
      cpusAllowed: status.match(/^Cpus_allowed_list:\s+(.*)$/m)?.[1] ?? "?",
    });
  }
  return facts;
}

/**
 * User plus system CPU seconds of each live process (all its threads), by pid; with
 * `reapedChildren`, also those of the children it has waited for (a Valkey's rewrite forks).
 */
export function cpuSeconds(
  pids: readonly number[],
  { reapedChildren = false } = {},
): Map<number, number> {
  const seconds = new Map<number, number>();
  for (const pid of pids) {
    const stat = readText(`/proc/${pid}/stat`);
    if (stat === undefined) continue;
    // Fields after the command name, which may hold spaces, closed by the last ')':
    // utime, stime, cutime and cstime are fields 14-17 of the line, 11-14 here.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const used = (reapedChildren ? [11, 12, 13, 14] : [11, 12]).map((i) => Number(fields[i]));
    seconds.set(pid, used.reduce((sum, ticks) => sum + ticks, 0) / TICKS_PER_SECOND);
  }
  return seconds;
}

/** The matchd subcommand a process runs, from its command line, or undefined. */
function matchdRole(pid: number): string | undefined {
  const args = readText(`/proc/${pid}/cmdline`)?.split("\0") ?? [];
  if (args.includes("conductor")) return "conductor";
  if (args.includes("outbox")) return "outbox";
  return undefined;
}

/**
 * CPU seconds of a cell's components over one run, sampled from /proc: each server with its
 * descendants (RabbitMQ's beam.smp under its start script), and the bench child with the
 * conductor and outbox it starts. A process that exits keeps its last sample, so up to one
 * sampling interval of its end is missed.
 */
export class CellCpu {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, { component: string; seconds: number }>();

  constructor(
    private readonly servers: Record<string, number>,
    private readonly benchPid: number,
  ) {
    for (const pid of withDescendants(Object.values(servers))) {
      this.first.set(pid, cpuSeconds([pid]).get(pid) ?? 0);
    }
  }

  sample(): void {
    for (const [component, root] of Object.entries(this.servers)) {
      this.record(component, withDescendants([root]));
    }
    for (const pid of withDescendants([this.benchPid])) {
      this.record(matchdRole(pid) ?? "bench", [pid]);
    }
  }

  /** CPU seconds per component since the tracker was made. */
  totals(): Record<string, number> {
    const totals: Record<string, number> = {};
    for (const [pid, { component, seconds }] of this.last) {
      const used = seconds - (this.first.get(pid) ?? 0);
      totals[component] = Math.round(((totals[component] ?? 0) + used) * 100) / 100;
    }
    return totals;
  }

  private record(component: string, pids: readonly number[]): void {
    for (const [pid, seconds] of cpuSeconds(pids)) {
      // A process already counted under its own component keeps it (the bench's children).
      const known = this.last.get(pid);
      this.last.set(pid, { component: known?.component ?? component, seconds });
    }
  }
}

/** Interrupt counts per source and CPU, from /proc/interrupts. */
export function readInterrupts(): Map<string, number[]> {
  const counts = new Map<string, number[]>();
  const lines = (readText("/proc/interrupts") ?? "").split("\n");
  const cpus = (lines[0] ?? "").trim().split(/\s+/).length;
  for (const line of lines.slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < cpus + 1) continue;
    const values = fields.slice(1, cpus + 1).map(Number);
    if (values.some(Number.isNaN)) continue;
    const name = fields.slice(cpus + 1).join(" ") || fields[0]!;
    counts.set(name, values);
  }
  return counts;
}

/** The three sources that interrupted most between two readings, with each CPU's share. */
export function busiestInterrupts(
  before: Map<string, number[]>,
  after: Map<string, number[]>,
): { source: string; perCpu: number[] }[] {
  const deltas = [...after].map(([source, values]) => ({
    source,
    perCpu: values.map((v, cpu) => v - (before.get(source)?.[cpu] ?? 0)),
  }));
  const total = (d: { perCpu: number[] }) => d.perCpu.reduce((a, b) => a + b, 0);
  return deltas.sort((a, b) => total(b) - total(a)).slice(0, 3);
}
