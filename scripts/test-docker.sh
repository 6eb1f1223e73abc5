#!/usr/bin/env bash
# `npm run test:docker`: builds the matchd image, checks it, then runs compose.yaml and
# compose.ha.yaml end to end against it, orders placed from the host. Installs what is
# missing from Debian's packages, starts dockerd when none runs (and stops only that one),
# builds or reuses the local base, Valkey and RabbitMQ images, and always removes the
# containers, networks and volumes it created. MATCHD_TEST_DOCKER_HA=0 skips compose.ha.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."

started_at=$(date +%s)
image=matchd-local/matchd:test
env_file=docker/local.env
ha=${MATCHD_TEST_DOCKER_HA:-1}

log() { printf 'test-docker: %s\n' "$*"; }
fatal() { printf 'test-docker: %s\n' "$*" >&2; exit 1; }
elapsed() { echo "$(($(date +%s) - started_at)) s"; }

passed=0
failed=0
stack_failed=0
check() {
  local what=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    printf 'ok   %s\n' "$what"
  else
    failed=$((failed + 1))
    stack_failed=1
    printf 'FAIL %s\n' "$what"
  fi
}

# Retries a command every half second until it succeeds or the bound (seconds) passes.
until_ok() {
  local bound=$1 deadline
  shift
  deadline=$(($(date +%s) + bound))
  until "$@" 2>/dev/null; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

work=$(mktemp -d -t matchd-test-docker-XXXXXX)
dockerd_pid=""
events_pid=""
projects=()
compose=()

stop_dockerd() {
  [ -n "$dockerd_pid" ] || return 0
  log "stopping the dockerd this test started"
  kill -TERM "$dockerd_pid" 2>/dev/null || return 0
  local _
  for _ in $(seq 1 150); do
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$dockerd_pid" 2>/dev/null || true
  wait "$dockerd_pid" 2>/dev/null || true
  dockerd_pid=""
}

cleanup() {
  if [ -n "$events_pid" ]; then kill "$events_pid" 2>/dev/null || true; fi
  local entry
  for entry in "${projects[@]}"; do
    "${compose[@]}" --env-file "$env_file" -p "${entry%%|*}" -f "${entry#*|}" down -v --remove-orphans \
      >/dev/null 2>&1 || true
  done
  stop_dockerd
  rm -rf "$work"
}
trap cleanup EXIT
# An interrupt still runs the cleanup.
trap 'exit 130' INT TERM

# --- What is missing: Debian's Docker engine, compose, debootstrap; node modules, ./matchd.
# shellcheck source=scripts/apt.sh
. scripts/apt.sh
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
if command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
else
  need+=(docker-compose)
  compose=(docker-compose)
fi
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]} from Debian's packages"
  apt_update
  apt_install --no-install-recommends "${need[@]}" >/dev/null
fi
# The image takes this binary, and the host's client commands are the same one.
# shellcheck source=scripts/matchd-build.sh
. scripts/matchd-build.sh
ensure_node_modules
ensure_matchd

# --- dockerd: the one running, else one of our own.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  # In a session of its own: an interrupt of the test must not stop it before the cleanup
  # has removed the containers.
  setsid dockerd >"$work/dockerd.log" 2>&1 </dev/null &
  dockerd_pid=$!
  deadline=$(($(date +%s) + 60))
  until docker info >/dev/null 2>&1; do
    if ! kill -0 "$dockerd_pid" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
      tail -20 "$work/dockerd.log" >&2
      fatal "dockerd did not start"
    fi
    sleep 0.5
  done
fi

# --- Images: the local base, Valkey and RabbitMQ (built once, then reused), then matchd.
bash scripts/docker-images.sh 2>&1 | sed 's/^/  /'
# shellcheck source=docker/local.env
. "$env_file"
log "building $image from the host's ./matchd, with no network in the build"
old_id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
# --force-rm: a failed step leaves no container behind.
if ! docker build --force-rm --network none --build-arg "BUILD_IMAGE=$MATCHD_BUILD_IMAGE" \
  --build-arg "BASE=$MATCHD_BASE_IMAGE" --build-arg MATCHD_PREBUILT=1 -t "$image" . \
  >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log" >&2
  fatal "docker build failed"
fi
new_id=$(docker image inspect -f '{{.Id}}' "$image")
# The image this one replaces, and the legacy builder's leftover build stages, only ours.
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then docker rmi "$old_id" >/dev/null 2>&1 || true; fi
docker image prune -f --filter label=matchd.stage=build >/dev/null
log "images ready after $(elapsed)"

# --- The image itself.
help_ok() { docker run --rm "$image" --help | grep -q '^usage: matchd <command>'; }
check "docker run $image --help prints the usage" help_ok
size=$(docker image inspect -f '{{.Size}}' "$image")
base_size=$(docker image inspect -f '{{.Size}}' "$MATCHD_BASE_IMAGE")
binary_size=$(stat -c %s ./matchd)
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
log "image size: $(mb "$size") (base $(mb "$base_size"), matchd $(mb "$binary_size"))"
# The image is the base, the binary and a small health check script: nothing else may creep in.
check "image size $(mb "$size") is at most base + matchd + 1 MB" \
  test "$size" -le $((base_size + binary_size + 1000000))
user_ok() { [ "$(docker image inspect -f '{{.Config.User}}' "$image")" = matchd ]; }
check "image USER is matchd" user_ok
uid_ok() { local uid; uid=$(docker run --rm --entrypoint id "$image" -u) && [ -n "$uid" ] && [ "$uid" != 0 ]; }
check "a container of the image runs as a non-root uid" uid_ok
healthcheck_ok() { docker image inspect -f '{{json .Config.Healthcheck.Test}}' "$image" | grep -q matchd-healthcheck; }
check "image has a HEALTHCHECK" healthcheck_ok
allocator_ok() { docker image inspect -f '{{json .Config.Env}}' "$image" | grep -q '"MIMALLOC_PURGE_DELAY=-1"'; }
check "image sets MIMALLOC_PURGE_DELAY=-1 (docs/operations.md)" allocator_ok

# --- Compose, end to end.
read -r -a ports <<<"$(node -e '
  // Free loopback ports, all held at once so that no two are the same.
  const net = require("node:net");
  (async () => {
    const servers = [];
    for (let i = 0; i < Number(process.argv[1]); i++) {
      const server = net.createServer();
      await new Promise((listening) => server.listen(0, "127.0.0.1", listening));
      servers.push(server);
    }
    console.log(servers.map((s) => s.address().port).join(" "));
    for (const server of servers) server.close();
  })();' 11)"

cid() { "${compose[@]}" --env-file "$env_file" -p "$project" -f "$file" ps -q "$1"; }
http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1$2" || true; }
readyz_ok() { [ "$(http_code "$1" /readyz)" = 200 ]; }
role_of() { curl -s --max-time 2 "http://127.0.0.1:$1/readyz" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{console.log(JSON.parse(s).role)}catch{console.log("none")}})'; }
health_of() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$(cid "$1")"; }
healthy() { [ "$(health_of "$1")" = healthy ]; }
runs_non_root() { local uid; uid=$(docker exec "$(cid "$1")" id -u) && [ -n "$uid" ] && [ "$uid" != 0 ]; }
broker_ctl() { docker exec "$(cid "$broker_service")" rabbitmqctl -q "$@"; }
fsync_always() {
  docker exec "$(cid "$1")" valkey-cli config get appendfsync | grep -qx always &&
    docker exec "$(cid "$1")" valkey-cli config get appendonly | grep -qx yes
}
vhost_quorum() { broker_ctl list_vhosts name default_queue_type | grep -qE '^matchq[[:space:]]+quorum$'; }
events_bound() { broker_ctl list_consumers -p matchq | grep -q '^amq\.gen'; }
events_count() { grep -c "\"type\":\"$1\"" "$events_file" || true; }
# At least once: a republished event may arrive twice.
events_seen() {
  [ "$(events_count order.rested.v1)" -ge 1 ] && [ "$(events_count order.filled.v1)" -ge 2 ] &&
    [ "$(events_count deal.executed.v1)" -ge 1 ]
}
nothing_left() {
  local filter="label=com.docker.compose.project=$project"
  [ -z "$(docker ps -aq --filter "$filter")$(docker volume ls -q --filter "$filter")$(docker network ls -q --filter "$filter")" ]
}

# Runs one compose file: up, readiness and health, the stack's own checks ($1 names them),
# a bid and an ask that trade, sent from the host, their events and the empty book, down -v.
# The caller sets: file, project, http (service=host port pairs), broker_service, broker_urls,
# and exports the compose file's port variables.
run_stack() {
  local kind=$1 entry service port t0
  t0=$(date +%s)
  stack_failed=0
  projects+=("$project|$file")
  log "$file: up (project $project)"
  if ! "${compose[@]}" --env-file "$env_file" -p "$project" -f "$file" up -d --no-build \
    >"$work/$project-up.log" 2>&1; then
    cat "$work/$project-up.log" >&2
    failed=$((failed + 1))
    printf 'FAIL %s\n' "$file: docker-compose up"
    "${compose[@]}" --env-file "$env_file" -p "$project" -f "$file" down -v --remove-orphans >/dev/null 2>&1 || true
    return 0
  fi
  for entry in "${http[@]}"; do
    service=${entry%%=*} port=${entry#*=}
    check "$file: $service /readyz answers 200" until_ok 120 readyz_ok "$port"
  done
  log "$file: ready after $(($(date +%s) - t0)) s"
  for entry in "${http[@]}"; do
    service=${entry%%=*}
    check "$file: $service container turns healthy (HEALTHCHECK)" until_ok 60 healthy "$service"
    check "$file: $service runs as a non-root uid" runs_non_root "$service"
  done
  "stack_checks_$kind"
  check "$file: vhost matchq has default queue type quorum" vhost_quorum

  events_file="$work/$project-events.jsonl"
  MATCHING_BROKER_URL=$broker_urls ./matchd events --follow --json >"$events_file" 2>&1 &
  events_pid=$!
  check "$file: events follower bound to the event exchanges" until_ok 30 events_bound
  local bid ask
  bid=$(MATCHING_BROKER_URL=$broker_urls ./matchd order place --pair 1 --side bid --price 100 \
    --volume 1 --user alice --json 2>&1 || true)
  check "$file: a bid from the host rests" grep -q '"codeName":"rested"' <<<"$bid"
  ask=$(MATCHING_BROKER_URL=$broker_urls ./matchd order place --pair 1 --side ask --price 100 \
    --volume 1 --user bob --json 2>&1 || true)
  check "$file: the ask at the same price and volume fills" grep -q '"codeName":"filled"' <<<"$ask"
  check "$file: events order.rested.v1, 2 x order.filled.v1, deal.executed.v1 arrive" \
    until_ok 20 events_seen
  kill "$events_pid" 2>/dev/null || true
  wait "$events_pid" 2>/dev/null || true
  events_pid=""
  # The book of the conductor that matched: the active one.
  local active="" book
  for entry in "${http[@]}"; do
    service=${entry%%=*} port=${entry#*=}
    case $service in conductor*) [ "$(role_of "$port")" = active ] && active=$port ;; esac
  done
  check "$file: a conductor is active" test -n "$active"
  book=$(./matchd book 1 --json --conductor-url "http://127.0.0.1:${active:-0}" 2>&1 || true)
  check "$file: the book of pair 1 is empty" test "$book" = '{"pairId":1,"bids":[],"asks":[],"stops":[],"halted":false}'
  "stack_roles_$kind"

  if [ "$stack_failed" = 1 ]; then
    log "$file: a check failed; the last log lines of each service follow"
    "${compose[@]}" --env-file "$env_file" -p "$project" -f "$file" logs --no-color --tail 30 >&2 || true
    printf '%s\n%s\n' "bid: $bid" "ask: $ask" >&2
    if [ -f "$work/queue-members.txt" ]; then printf 'queue: %s\n' "$(cat "$work/queue-members.txt")" >&2; fi
  fi
  "${compose[@]}" --env-file "$env_file" -p "$project" -f "$file" down -v --remove-orphans \
    >"$work/$project-down.log" 2>&1 || cat "$work/$project-down.log" >&2
  check "$file: down -v left no container, volume or network" nothing_left
  log "$file: done in $(($(date +%s) - t0)) s"
}

stack_checks_single() {
  local service
  for service in valkey-primary valkey-replica; do
    check "$file: $service has appendonly yes, appendfsync always" fsync_always "$service"
  done
}
stack_roles_single() {
  check "$file: the outbox is active" test "$(role_of "$MATCHD_OUTBOX_PORT")" = active
  check "$file: the feed's book of pair 1 is empty after the trade (seq 4)" until_ok 20 feed_book_traded
}
# The trade's events are numbered 1 (the bid rests) to 4 (the deal): the feed's pair 1 is at 4.
feed_book_traded() {
  local book
  book=$(curl -s --max-time 2 "http://127.0.0.1:$MATCHD_FEED_PORT/feed/books/1") || return 1
  grep -q '"seq":4,"bids":\[\],"asks":\[\]' <<<"$book"
}

sentinels_know_all() {
  local s info
  for s in sentinel-1 sentinel-2 sentinel-3; do
    info=$(docker exec "$(cid "$s")" valkey-cli -p 26379 sentinel master matchd | paste - -) || return 1
    grep -qE '^num-slaves[[:space:]]+2$' <<<"$info" && grep -qE '^num-other-sentinels[[:space:]]+2$' <<<"$info" || return 1
  done
}
cluster_of_three() {
  broker_ctl cluster_status --formatter json |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.exit(JSON.parse(s).running_nodes.length===3?0:1))'
}
# The queue's line, e.g. `matching:commands.p0  quorum  [rabbit@rabbitmq-1, rabbit@rabbitmq-3, ...]`,
# kept in the work directory for the failure report.
queue_on_three() {
  local line
  line=$(broker_ctl list_queues -p matchq name type members | grep '^matching:commands\.p0[[:space:]]') || return 1
  printf '%s\n' "$line" >"$work/queue-members.txt"
  grep -qE '[[:space:]]quorum[[:space:]]' <<<"$line" &&
    [ "$(grep -oE 'rabbit@rabbitmq-[123]' <<<"$line" | sort -u | wc -l)" = 3 ]
}
stack_checks_ha() {
  local service
  for service in valkey-1 valkey-2 valkey-3; do
    check "$file: $service has appendonly yes, appendfsync always" fsync_always "$service"
  done
  check "$file: each Sentinel knows the primary, 2 replicas and 2 other Sentinels" \
    until_ok 30 sentinels_know_all
  check "$file: RabbitMQ runs 3 nodes in one cluster" cluster_of_three
}
one_active_one_standby() { [ "$1 $2" = "active standby" ] || [ "$1 $2" = "standby active" ]; }
stack_roles_ha() {
  local a b
  a=$(role_of "$MATCHD_CONDUCTOR_PORT") b=$(role_of "$MATCHD_CONDUCTOR_STANDBY_PORT")
  check "$file: one conductor active, one standby ($a, $b)" one_active_one_standby "$a" "$b"
  a=$(role_of "$MATCHD_OUTBOX_PORT") b=$(role_of "$MATCHD_OUTBOX_STANDBY_PORT")
  check "$file: one outbox active, one standby ($a, $b)" one_active_one_standby "$a" "$b"
  check "$file: matching:commands.p0 is a quorum queue on all 3 nodes" until_ok 20 queue_on_three
  check "$file: the feed's book of pair 1 is empty after the trade (seq 4)" until_ok 20 feed_book_traded
}

export MATCHD_IMAGE=$image
export MATCHD_BROKER_PORT=${ports[0]} MATCHD_CONDUCTOR_PORT=${ports[1]} MATCHD_OUTBOX_PORT=${ports[2]}
export MATCHD_FEED_PORT=${ports[10]}
file=compose.yaml project=matchd-test-$$ broker_service=rabbitmq
http=("conductor=$MATCHD_CONDUCTOR_PORT" "outbox=$MATCHD_OUTBOX_PORT" "feed=$MATCHD_FEED_PORT")
broker_urls="amqp://matchd:matchd@127.0.0.1:$MATCHD_BROKER_PORT/matchq"
run_stack single

if [ "$ha" != 0 ]; then
  export MATCHD_BROKER_PORT_1=${ports[3]} MATCHD_BROKER_PORT_2=${ports[4]} MATCHD_BROKER_PORT_3=${ports[5]}
  export MATCHD_CONDUCTOR_PORT=${ports[6]} MATCHD_CONDUCTOR_STANDBY_PORT=${ports[7]}
  export MATCHD_OUTBOX_PORT=${ports[8]} MATCHD_OUTBOX_STANDBY_PORT=${ports[9]}
  file=compose.ha.yaml project=matchd-test-ha-$$ broker_service=rabbitmq-1
  http=("conductor=$MATCHD_CONDUCTOR_PORT" "conductor-standby=$MATCHD_CONDUCTOR_STANDBY_PORT"
    "outbox=$MATCHD_OUTBOX_PORT" "outbox-standby=$MATCHD_OUTBOX_STANDBY_PORT"
    "feed=$MATCHD_FEED_PORT")
  broker_urls=""
  for port in "$MATCHD_BROKER_PORT_1" "$MATCHD_BROKER_PORT_2" "$MATCHD_BROKER_PORT_3"; do
    broker_urls+="${broker_urls:+,}amqp://matchd:matchd@127.0.0.1:$port/matchq"
  done
  run_stack ha
fi

log "finished in $(elapsed)"
echo "test-docker: $passed passed, $failed failed"
[ "$failed" = 0 ]
