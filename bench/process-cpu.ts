/**
 * CPU seconds of each process a bench run involves, read from /proc. A server or service is
 * found by the TCP port it listens on, so the same code covers a private stack and services
 * given by URL, as long as they run on this machine (in this network namespace).
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { cpuSeconds } from "./cell-processes";

function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      // State 0A is LISTEN; column 9 is the socket's inode.
      if (cols.length < 10 || cols[3] !== "0A") continue;
      if (Number.parseInt(cols[1]!.split(":")[1]!, 16) === port) inodes.add(cols[9]!);
    }
  }
  return inodes;
}

/** The pid of the process that listens on `port`, if it runs here and can be seen. */
export function listeningPid(port: number): number | undefined {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return undefined;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${entry}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode !== undefined && inodes.has(inode)) return Number(entry);
    }
  }
  return undefined;
}

/** CPU seconds of `pid` and of the children it reaped; undefined once it is gone. */
function cpuSecondsOf(pid: number): number | undefined {
  return cpuSeconds([pid], { reapedChildren: true }).get(pid);
}

/** The port in a URL, with the scheme's default when none is written. */
function portOf(url: string): number | undefined {
  try {
    const parsed = new URL(url);
    const defaults: Record<string, number> = { "redis:": 6379, "amqp:": 5672, "http:": 80 };
    return parsed.port === "" ? defaults[parsed.protocol] : Number(parsed.port);
  } catch {
    return undefined;
  }
}

interface Watched {
  name: string;
  pid: number | undefined;
  before: number | undefined;
}

/** CPU seconds over a window, per process; the bench's own from process.cpuUsage(). */
export class CpuWatch {
  private readonly benchBefore = process.cpuUsage();

  private constructor(private readonly watched: Watched[]) {}

  /** Each named process found by its URL's port, with its CPU seconds now. */
  static open(targets: readonly { name: string; url: string }[]): CpuWatch {
    return new CpuWatch(
      targets.map(({ name, url }) => {
        const port = portOf(url);
        const pid = port === undefined ? undefined : listeningPid(port);
        return { name, pid, before: pid === undefined ? undefined : cpuSecondsOf(pid) };
      }),
    );
  }

  /** CPU seconds each spent since open; a process not found here is left out and named. */
  close(): { seconds: Record<string, number>; notMeasured: string[] } {
    const seconds: Record<string, number> = {};
    const notMeasured: string[] = [];
    for (const { name, pid, before } of this.watched) {
      const after = pid === undefined ? undefined : cpuSecondsOf(pid);
      if (after === undefined || before === undefined) notMeasured.push(name);
      else seconds[name] = Math.round((after - before) * 100) / 100;
    }
    const bench = process.cpuUsage(this.benchBefore);
    seconds.bench = Math.round((bench.user + bench.system) / 1e4) / 100;
    return { seconds, notMeasured };
  }
}
