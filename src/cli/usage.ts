/**
 * Help texts for every subcommand, generated from the config schema so flags and
 * environment variables are documented in one place.
 */
import { readsFlag } from "../config/flag-scope";
import { type Subcommand, settings } from "../config/schema";
import { exitCodeLines } from "../infra/exit-codes";

/** The settings `reads` says yes to, one line each with its variable, values and default. */
export function settingsUsage(reads: (flag: string) => boolean, subcommand: Subcommand): string {
  const lines = settings
    .filter((s) => reads(s.flag))
    .map((s) => {
      const fallback = s.defaultFor(subcommand);
      return `  ${s.flag.padEnd(26)} ${s.env.padEnd(32)} ${s.accepted} [default ${fallback === "" ? "none" : fallback}]`;
    });
  return `configuration (flag, environment variable, accepted values, default):\n${lines.join("\n")}\n`;
}

/** The settings `subcommand` reads; the others' flags are refused there, their variables not. */
export const configUsageFor = (
  subcommand: "conductor" | "outbox" | "feed" | "check" | "bench",
): string => settingsUsage((flag) => readsFlag(subcommand, flag), subcommand);

export const mainUsage = `matchd: exchange order matching with a durable single writer per partition

usage: matchd <command> [flags]

commands:
  conductor   consume partition N's commands, match, commit atomically, wait for durability, ack
  outbox      move partition N's committed events from Valkey to RabbitMQ, in order, confirmed
  feed        serve partition N's books as market data: WebSocket, REST snapshots, a live page
  bench       measure a boundary: domain | datastore | broker | conductor | outbox-drain | full-pipeline | round-trip | capacity
  stack       up | down | status: a private local Valkey primary + replica and RabbitMQ node
  check       run the datastore and broker checks of the durability policy, start nothing

client commands (speak the wire contract to a running conductor and outbox):
  order       place | oco | cancel | amend | cancel-all: send a command, print its durable result
  pair        halt | resume: an operator's command (MATCHING_OPERATOR_USERS)
  session     cancel-after: arm, renew or disarm a user's dead-man's switch
  book        a pair's depth ladder, from the conductor
  watch       a pair's live ladder and trades, from the feed
  result      a command's stored result, from the conductor
  events      print events as they are published

  matchd <command> --help   flags of one command
  matchd --version

exit codes:
${exitCodeLines.map((line) => `  ${line}`).join("\n")}
`;

/** Every subcommand's help but the bench's, which the bench declares (bench/usage.ts). */
export const commandUsage: Record<string, string> = {
  conductor: `usage: matchd conductor [--partition N] [config flags]

The single writer of partition N: consumes matching:commands.p<N>, applies commands
through the domain in batches, commits each batch atomically in Valkey, waits for the
durability policy (WAITAOF 1 1 under aof-replicated), then acknowledges and replies.

${configUsageFor("conductor")}`,
  outbox: `usage: matchd outbox [--partition N] [--window W] [config flags]

Moves partition N's committed events from its Valkey stream to RabbitMQ in stream
order on one confirm channel, at least once, keeping up to W publishes unconfirmed.

${configUsageFor("outbox")}`,
  feed: `usage: matchd feed [--partition N] [config flags]

Market data for partition N: keeps every book of the partition in memory from a durable
snapshot and the published events (in x-partition-sequence order), and serves it on
/ws (WebSocket: book at a depth, l3, trades; sequenced, with a CRC32 checksum),
/feed/books/:pairId?depth=D (REST snapshot) and / (a live page). It only reads: run as
many as you like per partition.

${configUsageFor("feed")}`,
  check: `usage: matchd check [config flags]

Runs the checks the durability policy needs (WAITAOF support, primary role, appendonly,
appendfsync always, a connected replica, appendonly and appendfsync always on each replica,
a probe write fsynced on the primary and every healthy replica; with a redis+sentinel:// URL
also that the Sentinels answer and see a replica) plus broker reachability, prints each as
pass/fail and exits 0 when all pass, 3 otherwise.

${configUsageFor("check")}`,
  stack: `usage: matchd stack up|down|status --dir DIR [--no-tap] [--ha | --cluster]

up      start a Valkey primary + replica (appendonly yes, appendfsync always, hz 500,
        auto-aof-rewrite-percentage 300) and a private RabbitMQ node on free loopback
        ports, wait until WAITAOF 1 1 succeeds and an AMQP channel opens, print
        MATCHING_* URL lines, and leave them running; DIR/env
        exports them when sourced, and docker run --env-file reads it too. It also declares
        the queue matchd.tap, bound to every event exchange and holding at most 10,000
        events (the oldest dropped first), so that no event is unroutable on a first try;
        --no-tap leaves it out (the tests and benchmarks do). With --ha, three Valkey nodes
        (valkey-1 the first primary, valkey-2 and valkey-3 its replicas) under three
        Sentinels (master matchd, quorum 2, down-after 1000 ms, failover-timeout 2000 ms:
        short, for tests); it waits for WAITAOF 1 2 and for every Sentinel to know both
        replicas and both other Sentinels; MATCHING_DATASTORE_URL is then
        redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/matchd. The broker is then
        a three-node RabbitMQ cluster (rabbitmq-1..3, one cookie, in DIR/rabbitmq-1..3)
        that the nodes form as they boot side by side; it waits for the cluster to report
        three running nodes and for an AMQP channel on the vhost on each node;
        MATCHING_BROKER_URL is then the three nodes' URLs, comma-separated, and
        DIR/rabbitmqctl, DIR/rabbitmqctl-2 and DIR/rabbitmqctl-3 reach each node. With
        --cluster, a Valkey Cluster instead of the pair: three primaries with a replica each
        (valkey-cluster-1..6, cluster-node-timeout 5000 ms), formed with valkey-cli --cluster
        create; MATCHING_DATASTORE_URL is then redis+cluster://127.0.0.1:P1,...,P6/
down    stop exactly the processes 'up' started in DIR (by pid), restarted --ha nodes too
status  print the recorded stack and whether each process is alive; with --ha also each
        node's role and the primary each Sentinel names, each broker node up or down, and
        the node holding the leader of the command queue matching:commands.p0 if it exists
`,
};

/**
 * What follows a usage error: one line on where help is, as git, cargo and kubectl print,
 * so that the problem stays on screen instead of scrolling away above the whole help.
 */
export function helpHint(command?: string): string {
  return command === undefined
    ? "Run 'matchd --help' for the commands.\n"
    : `Run 'matchd ${command} --help' for its flags and settings.\n`;
}
