#!/usr/bin/env bash
# The test command (`npm test`): installs what is missing, type-checks, lints, starts a
# private stack (Valkey primary + replica with AOF, RabbitMQ), runs every test against
# it, and always stops the stack.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Only the tests need a browser: the HTML bench report is rendered in headless Chromium.
bash scripts/install-chromium.sh
node_modules/.bin/tsc --noEmit -p .
node_modules/.bin/biome check src test bench examples

# Resolved: /proc/*/cwd, which the cleanup compares with it, shows resolved paths.
stack_dir=$(realpath "$(mktemp -d -t matchd-test-stack-XXXXXX)")
# Tests start servers of their own (restarts, outages, boot refusals) in temp dirs, and stop
# them in afterAll, which an interrupt skips: their temp dirs live under $stack_dir, so the
# cleanup can find whatever is left running there.
mkdir "$stack_dir/tmp"
export TMPDIR="$stack_dir/tmp"
cleanup() {
  ./matchd stack down --dir "$stack_dir" >/dev/null 2>&1 || true
  local cwd pid
  for cwd in /proc/[0-9]*/cwd; do
    case "$(readlink "$cwd" 2>/dev/null)" in
      "$stack_dir"/*)
        pid=${cwd#/proc/}
        kill -KILL "${pid%/cwd}" 2>/dev/null || true
        ;;
    esac
  done
  rm -rf "$stack_dir"
}
trap cleanup EXIT
./matchd stack up --no-tap --dir "$stack_dir" >/dev/null
set -a
# shellcheck disable=SC1091
source "$stack_dir/env"
set +a

node_modules/.bin/bun test --timeout 60000 "$@"
# The image and compose.yaml end to end (docs/docker.md): 88 s here with no local image. After
# the other tests, so its load does not slow them; skipped when a subset was asked for.
# compose.ha.yaml adds 70 s, past the suite's 15-minute budget: `npm run test:docker` runs it.
if [ "$#" -eq 0 ]; then MATCHD_TEST_DOCKER_HA="${MATCHD_TEST_DOCKER_HA:-0}" bash scripts/test-docker.sh; fi
