#!/usr/bin/env bash
# Installs Debian's Chromium (plus one font, so headless screenshots show text), which
# test/bench/html-report.test.ts uses to prove the HTML bench report renders. Idempotent:
# does nothing when /usr/bin/chromium already exists; apt's output is shown only on failure.
set -euo pipefail

[ -x /usr/bin/chromium ] && exit 0

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
log=$(mktemp -t matchd-install-chromium-XXXXXX)
trap 'rm -f "$log"' EXIT
printf 'install-chromium: installing Debian package chromium\n' >&2
# Waits for the dpkg lock a freshly booted machine's apt timers may hold (setup.sh, which
# runs first, has already waited for the lists lock through its update).
wait_locks=(-o DPkg::Lock::Timeout=300)
if ! { as_root apt-get "${wait_locks[@]}" update -qq &&
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${wait_locks[@]}" install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
