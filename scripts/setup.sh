#!/usr/bin/env bash
# Installs only what matchd's tests and benchmarks need and is missing: Valkey >= 7.2,
# RabbitMQ, the node modules, and the compiled ./matchd. Idempotent; quiet when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

valkey_ok() {
  command -v valkey-server >/dev/null 2>&1 || return 1
  local v; v=$(valkey-server --version | sed -n 's/.*v=\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  set -- $v
  [ "${1:-0}" -gt 7 ] || { [ "${1:-0}" -eq 7 ] && [ "${2:-0}" -ge 2 ]; }
}

# A freshly booted machine's apt timers can hold apt's locks for a while: installs wait for
# the dpkg lock (up to 5 minutes), and an update, whose lists lock that option may not
# cover, is retried for as long.
apt_wait=(-o DPkg::Lock::Timeout=300)
apt_updated=0
apt_update() {
  [ "$apt_updated" = 1 ] && return 0
  local tries=0
  until as_root apt-get "${apt_wait[@]}" update -qq >/dev/null; do
    tries=$((tries + 1))
    [ "$tries" -lt 30 ] || return 1
    log "apt-get update failed (another apt running?); retrying in 10 s"
    sleep 10
  done
  apt_updated=1
}

# The URI of the machine's Debian archive in deb822 sources: the first stanza listing the
# codename as a suite and signed by Debian's archive key (or, failing that, whose URI ends in
# /debian), so another vendor's repository for the same codename is never taken for it.
debian_uri() {
  awk -v s="$1" '
    function flush() { if (suite && uri != "" && !best) { if (debian) best = uri; else if (!fallback && uri ~ /\/debian\/?$/) fallback = uri } }
    FNR == 1 { flush(); uri = ""; suite = 0; debian = 0 }
    /^[[:space:]]*#/ { next }
    /^[[:space:]]*$/ { flush(); uri = ""; suite = 0; debian = 0; next }
    /^URIs:/ { uri = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) suite = 1 }
    /^Signed-By:.*debian-archive-keyring/ { debian = 1 }
    END { flush(); print (best != "" ? best : fallback) }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
}

# Adds Debian's backports suite using the URIs of the machine's own Debian source,
# so no registry host is ever written into this repository.
add_backports() {
  local codename uris
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  # An active (not commented-out) backports entry is enough.
  if grep -rEqs "^[^#]*[[:space:]]${codename}-backports([[:space:]]|$)" /etc/apt/sources.list /etc/apt/sources.list.d/; then return 0; fi
  uris=$(debian_uri "$codename")
  if [ -z "$uris" ] && [ -f /etc/apt/sources.list ]; then
    # One-line form, options in brackets skipped: deb [signed-by=...] URI suite components
    uris=$(awk -v s="$codename" '$1=="deb" { i=2; if ($i ~ /^\[/) { while (i<=NF && $i !~ /\]$/) i++; i++ }
      if ($(i+1)==s) { print $i; exit } }' /etc/apt/sources.list)
  fi
  [ -n "$uris" ] || { log "cannot find the machine's Debian apt source to derive ${codename}-backports"; exit 1; }
  log "adding ${codename}-backports from ${uris}"
  printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uris" "$codename" | as_root tee /etc/apt/sources.list.d/matchd-backports.sources >/dev/null
  apt_updated=0
}

if ! valkey_ok; then
  add_backports
  apt_update
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  log "installing valkey-server from ${codename}-backports"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_wait[@]}" install -y -qq -t "${codename}-backports" valkey-server >/dev/null
  # The package starts a system-wide service on 6379; matchd runs its own private servers.
  as_root systemctl disable --now valkey-server >/dev/null 2>&1 || as_root service valkey-server stop >/dev/null 2>&1 || true
fi

if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  apt_update
  log "installing rabbitmq-server"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_wait[@]}" install -y -qq rabbitmq-server >/dev/null
  as_root systemctl disable --now rabbitmq-server >/dev/null 2>&1 || as_root service rabbitmq-server stop >/dev/null 2>&1 || true
fi

if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "installing node modules"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi

if [ ! -x ./matchd ] || [ -n "$(find src package-lock.json -newer ./matchd -print -quit 2>/dev/null)" ]; then
  log "building ./matchd"
  npm run --silent build >/dev/null
fi
