#!/usr/bin/env bash
# Runs every benchmark quoted in the README, one after another on private stacks, saving
# each JSON report in bench/results/ and printing a markdown summary of the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The bench process too keeps freed pages, as the services it starts do (docs/operations.md).
export MIMALLOC_PURGE_DELAY="${MIMALLOC_PURGE_DELAY:--1}"
out=bench/results
mkdir -p "$out"

# A run that fails does not stop the others; the script still exits non-zero at the end.
failed=()
run() {
  local name=$1; shift
  printf 'bench: %s: ./matchd bench %s\n' "$name" "$*" >&2
  local code=0
  ./matchd bench "$@" --json > "$out/$name.json" || code=$?
  # Interrupted (the bench exits 130 after stopping its stack): stop here, not at the next run.
  if [ "$code" -ge 128 ]; then exit "$code"; fi
  if [ "$code" -ne 0 ]; then
    # Exit 1 with a report is a failed invariant; anything else (a crash, a usage error,
    # a refused durability policy) left no report.
    if [ "$code" -eq 1 ] && [ -s "$out/$name.json" ]; then
      printf 'bench: %s reported a failed invariant (exit 1)\n' "$name" >&2
    else
      printf 'bench: %s failed with exit %s and no report\n' "$name" "$code" >&2
    fi
    failed+=("$name")
  fi
}

run domain-alternating domain --workload alternating
run domain-mixed domain --workload mixed --commands 500000
run domain-sweep domain --workload sweep
run domain-resting domain --resting 1000000
run datastore datastore --commands 5000
run broker broker --commands 40000
run broker-events broker --flow events --events 100000
run broker-rate1000 broker --rate 1000 --duration 20
run broker-rate2500 broker --rate 2500 --duration 20
run conductor conductor --commands 20000
run conductor-batch1 conductor --commands 2000 --batch-max 1
run conductor-ratio conductor-ratio --pairs 3
run outbox-drain outbox-drain --events 100000
run outbox-drain-window1 outbox-drain --events 5000 --window 1
run outbox-drain-queued outbox-drain --events 100000 --sink queued
run full-pipeline full-pipeline --commands 20000 --report "$out/full-pipeline.html"
run full-pipeline-rate2500 full-pipeline --rate 2500 --duration 20
run full-pipeline-rate1500 full-pipeline --rate 1500 --duration 20
run round-trip round-trip --rate 1000 --duration 20
run capacity capacity

node -e '
const fs = require("fs");
const dir = process.argv[1];
console.log("| run | boundary | workload | count | per second | p50 ms | p99 ms | p99.9 ms | max ms | invariants |");
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  let r;
  try {
    r = JSON.parse(fs.readFileSync(`${dir}/${file}`, "utf8"));
  } catch {
    console.log(`| ${file.replace(".json", "")} | no report (the run failed) | | | | | | | | FAILED |`);
    continue;
  }
  const l = r.latencyMs;
  const unit = r.unit ?? "commands";
  console.log(`| ${file.replace(".json", "")} | ${r.boundary} | ${r.workload} | ${r.commands} ${unit} | ${r.commandsPerSecond} ${unit}/s | ${l.p50} | ${l.p99} | ${l.p999} | ${l.max} | ${r.invariants.ok ? "ok" : "FAILED"} |`);
}
// The figures the README quotes from outside the columns above, so that every run keeps
// them (the JSON reports are overwritten by the next run).
const extra = (name) => {
  try {
    return JSON.parse(fs.readFileSync(`${dir}/${name}.json`, "utf8")).extra ?? {};
  } catch {
    return {};
  }
};
const resting = extra("domain-resting");
const datastore = extra("datastore");
console.log("");
console.log(`- domain-resting: ${resting.restingOrders} resting orders, RSS ${resting.rssMiB?.toFixed(1)} MiB`);
console.log(`- datastore tx/s: memory x1 ${datastore["memory x1 tx/s"]}, x8 ${datastore["memory x8 tx/s"]}; aof-replicated x1 ${datastore["aof-replicated x1 tx/s"]}, x8 ${datastore["aof-replicated x8 tx/s"]}`);
const ratio = extra("conductor-ratio");
if (ratio.ratio !== undefined) console.log(`- conductor-ratio: conductor ${ratio.conductorCommandsPerSecond} against broker alone ${ratio.brokerAloneCommandsPerSecond} /s, ratio ${ratio.ratio} (${ratio.target})`);
for (const name of ["broker-rate1000", "broker-rate2500"]) {
  const lag = extra(name).sendLagMs;
  if (lag !== undefined) console.log(`- ${name}: bench send lag ms ${typeof lag === "string" ? lag : JSON.stringify(lag)}`);
}' "$out"

if [ "${#failed[@]}" -gt 0 ]; then
  printf 'bench: failed: %s\n' "${failed[*]}" >&2
  exit 1
fi
