#!/usr/bin/env bash
# Installs Debian's Chromium (plus one font, so headless screenshots show text), which
# test/bench/html-report.test.ts uses to prove the HTML bench report renders. Idempotent:
# does nothing when /usr/bin/chromium already exists; apt's output is shown only on failure.
set -euo pipefail

[ -x /usr/bin/chromium ] && exit 0

cd "$(dirname "$0")/.."
# shellcheck source=scripts/apt.sh
. scripts/apt.sh
log=$(mktemp -t matchd-install-chromium-XXXXXX)
trap 'rm -f "$log"' EXIT
printf 'install-chromium: installing Debian package chromium\n' >&2
# apt_update retries while a freshly booted machine's apt timers hold the lists lock.
if ! { apt_update && apt_install --no-install-recommends chromium fonts-dejavu-core; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
