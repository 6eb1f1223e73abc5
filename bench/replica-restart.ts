/**
 * The soak's replica restart (--restart-replica-at): a SIGKILL of the plain stack's replica,
 * a restart from its own directory, and the wait until the primary lists it online again,
 * with the full resyncs the primary served meanwhile.
 */
import { join } from "node:path";
import { parseInfo, type Valkey } from "../src/infra/valkey/client";
import type { StackInfo } from "../src/stack/index";
import { restartValkey } from "../src/stack/valkey";
import type { OwnRun } from "./own-run";

/** Seconds since the load began. */
export interface ReplicaRestart {
  killedAtS: number;
  restartedAtS: number | undefined;
  /** When the primary listed it online again. */
  onlineAgainAtS: number | undefined;
  /** Full resyncs the primary served meanwhile (INFO stats sync_full). */
  fullResyncs: number;
  error?: string;
}

export class ReplicaRestarter {
  /** The replica's pid: another one after the restart. */
  pid: number;
  record: ReplicaRestart | undefined;
  private restarting: Promise<void> | undefined;

  constructor(
    private readonly info: StackInfo,
    private readonly primary: Valkey,
    private readonly own: OwnRun,
    private readonly progress: (line: string) => void,
    /** Seconds into the load; undefined: never. */
    private readonly at: number | undefined,
  ) {
    this.pid = info.pids["valkey-replica"] ?? 0;
  }

  /** Starts the restart once `t` (seconds into the load) reaches its moment; `since` tells time. */
  maybeStart(t: number, since: () => number): void {
    if (this.at === undefined || this.record !== undefined || t < this.at) return;
    const record: ReplicaRestart = {
      killedAtS: t,
      restartedAtS: undefined,
      onlineAgainAtS: undefined,
      fullResyncs: 0,
    };
    this.record = record;
    this.restarting = this.restart(record, since).catch((error: unknown) => {
      record.error = (error as Error).message;
    });
  }

  async done(): Promise<void> {
    await this.restarting;
  }

  private async restart(record: ReplicaRestart, since: () => number): Promise<void> {
    const fullBefore = await fullSyncs(this.primary);
    process.kill(this.pid, "SIGKILL");
    this.progress(`soak: SIGKILLed the replica at ${Math.round(record.killedAtS)} s`);
    await Bun.sleep(2000);
    const port = Number(new URL(this.info.replicaUrl).port);
    const restarted = await restartValkey({ dir: join(this.info.dir, "valkey-replica"), port });
    // Not in the stack's record: stackDown would leave it running.
    this.own.onTeardown(() => restarted.stop());
    this.pid = restarted.pid;
    record.restartedAtS = since();
    while (!(await replicaOnline(this.primary))) await Bun.sleep(200);
    record.onlineAgainAtS = since();
    record.fullResyncs = (await fullSyncs(this.primary)) - fullBefore;
    this.progress(`soak: the replica is online again at ${Math.round(record.onlineAgainAtS)} s`);
  }
}

async function fullSyncs(primary: Valkey): Promise<number> {
  return Number(parseInfo(await primary.info("stats")).get("sync_full") ?? 0);
}

async function replicaOnline(primary: Valkey): Promise<boolean> {
  const replication = await primary.info("replication").catch(() => "");
  return /slave\d+:.*state=online/.test(replication);
}
