// D/stack.json, the record of a private stack (what runs, on which ports), and the lock
// that keeps two commands from changing one stack directory at once.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { isRunning, processStartTicks, type RecordedProcess, StackError } from "./process";

export interface StackInfo {
  dir: string;
  datastoreUrl: string;
  replicaUrl: string;
  /**
   * amqp://guest:guest@127.0.0.1:PORT/matchd; with --ha the three broker nodes' URLs,
   * comma-separated, rabbitmq-1's first.
   */
  brokerUrl: string;
  /** Never set today: the management plugin is off because it slows the node's boot. */
  managementUrl?: string;
  pids: Record<string, number>;
  /** True when stackUp found this stack already running in `dir` and started nothing. */
  reused?: boolean;
  /**
   * Set for `stack up --ha`: three data nodes under three Sentinels (see ./ha) and a
   * three-node broker cluster (see ./rabbitmq-cluster).
   */
  ha?: HaInfo;
}

export interface HaInfo {
  /** The name the Sentinels monitor the primary under: "matchd". */
  masterName: string;
  /**
   * `source`: the loopback address its outgoing connections come from (bind-source-addr), so
   * that a partition can cut one server's links by address (./ha-faults.ts).
   */
  sentinels: { name: string; host: string; port: number; source?: string }[];
  /** valkey-1 (the first primary), valkey-2, valkey-3; their roles change on a failover. */
  nodes: { name: string; host: string; port: number; dir: string; source?: string }[];
  downAfterMs: number;
  failoverTimeoutMs: number;
  /** rabbitmq-1, rabbitmq-2, rabbitmq-3: the broker cluster's nodes, all alike once formed. */
  brokerNodes: BrokerNodeInfo[];
}

export interface BrokerNodeInfo {
  /** rabbitmq-1 .. rabbitmq-3, also the name of its data directory under the stack's. */
  name: string;
  /** The Erlang node name, matchd-<id>-<n>@localhost. */
  nodename: string;
  /** amqp://guest:guest@127.0.0.1:PORT/matchd */
  url: string;
  /** The AMQP port. */
  port: number;
  /** The inter-node (Erlang distribution) port. */
  distPort: number;
  dir: string;
}

/**
 * What D/stack.json holds. While starting it lists only the processes spawned so far, so
 * that stackDown can still stop them if the caller dies before the stack is ready.
 */
export type StackRecord =
  | { version: 1; status: "starting"; dir: string; processes: RecordedProcess[] }
  | (StackInfo & {
      version: 1;
      status: "up";
      startedAt: string;
      startupMs: number;
      ports: Record<string, number>;
      rabbitmqNode: string;
      processes: RecordedProcess[];
    });

export type UpRecord = Extract<StackRecord, { status: "up" }>;

export function readRecord(dir: string): StackRecord | undefined {
  const file = `${dir}/stack.json`;
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as StackRecord;
}

export function toInfo(record: UpRecord): StackInfo {
  const { dir, datastoreUrl, replicaUrl, brokerUrl, pids, ha } = record;
  return { dir, datastoreUrl, replicaUrl, brokerUrl, pids, ...(ha === undefined ? {} : { ha }) };
}

export function writeAtomically(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

/** Writes D/stack.json so that a reader never sees half of it. */
export function writeRecord(record: StackRecord): void {
  writeAtomically(`${record.dir}/stack.json`, `${JSON.stringify(record, null, 2)}\n`);
}

/**
 * Runs `action` holding `root/.lock` (created exclusively, holding the holder's pid and start
 * time): without it, two commands on one directory interleave, e.g. a second `stack up`
 * clearing the data under the first one's servers, or a `stack down` stopping a start
 * half-way that then goes on spawning. A lock whose holder is gone (a crash, a kill -9) is
 * taken over; one whose holder runs is refused at once rather than waited for. Within one
 * process the lock is shared (see below).
 */
export async function withDirLock<T>(
  root: string,
  what: string,
  action: () => Promise<T>,
): Promise<T> {
  const path = `${root}/.lock`;
  const mine = `${process.pid} ${processStartTicks(process.pid) ?? 0}\n`;
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, mine, { flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt >= 50) throw error;
    }
    let holder: string;
    try {
      holder = readFileSync(path, "utf8");
    } catch {
      continue; // released meanwhile: try again
    }
    const match = /^(\d+) (\d+)\n$/.exec(holder);
    if (match === null) {
      // Being written this instant (or truncated by a crash): look again shortly.
      await Bun.sleep(20);
      if (attempt >= 25) rmSync(path, { force: true });
      continue;
    }
    const pid = Number(match[1]);
    const startTicks = Number(match[2]);
    // This process's own start still holds it: the bench stops a start it cut short (a
    // Ctrl-C) while that start runs, on purpose; the holder releases it.
    if (`${pid} ${startTicks}\n` === mine) return action();
    if (isRunning(pid, startTicks || undefined)) {
      throw new StackError(
        "busy",
        `${what}: another matchd (pid ${pid}) is starting or stopping the stack in ${root}; let it finish, then try again`,
      );
    }
    rmSync(path, { force: true });
  }
  try {
    return await action();
  } finally {
    rmSync(path, { force: true });
  }
}

/** The stack's record, which must be an --ha stack that is (or was) up. */
export function haRecord(info: StackInfo): UpRecord & { ha: HaInfo } {
  const record = readRecord(info.dir);
  if (record?.status !== "up" || record.ha === undefined) {
    throw new StackError("not-ha", `no stack started with --ha is recorded in ${info.dir}`);
  }
  return record as UpRecord & { ha: HaInfo };
}

/** The node of `nodes` called `name` (`what` names the kind in the error). */
export function nodeNamed<T extends { name: string }>(
  nodes: readonly T[],
  name: string,
  what: string,
): T {
  const node = nodes.find((n) => n.name === name);
  if (node === undefined) {
    throw new StackError(
      "not-ha",
      `no ${what} ${name}; the nodes are ${nodes.map((n) => n.name).join(", ")}`,
    );
  }
  return node;
}
