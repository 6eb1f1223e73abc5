#!/usr/bin/env bash
# Installs only what matchd's tests and benchmarks need and is missing: Valkey >= 7.2,
# RabbitMQ, iptables, the node modules, and the compiled ./matchd. Idempotent; quiet when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'setup: %s\n' "$*" >&2; }
# shellcheck source=scripts/apt.sh
. scripts/apt.sh

valkey_ok() {
  command -v valkey-server >/dev/null 2>&1 || return 1
  local v; v=$(valkey-server --version | sed -n 's/.*v=\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  set -- $v
  [ "${1:-0}" -gt 7 ] || { [ "${1:-0}" -eq 7 ] && [ "${2:-0}" -ge 2 ]; }
}

# Adds Debian's backports suite using the URIs of the machine's own Debian source,
# so no registry host is ever written into this repository. Sets backports_added.
backports_file=/etc/apt/sources.list.d/matchd-backports.sources
backports_added=0
add_backports() {
  local codename uris
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  # An active backports entry in a file apt reads is enough: a one-line `deb` entry, or an
  # enabled deb822 stanza listing the suite.
  if grep -Eqs "^[[:space:]]*deb[[:space:]].*[[:space:]]${codename}-backports([[:space:]]|$)" \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list; then return 0; fi
  if [ -n "$(deb822_uri "${codename}-backports" any-uri)" ]; then return 0; fi
  uris=$(deb822_uri "$codename" signed)
  [ -n "$uris" ] || uris=$(list_uri "$codename")
  [ -n "$uris" ] || uris=$(deb822_uri "$codename" any)
  [ -n "$uris" ] || { log "cannot find the machine's Debian apt source to derive ${codename}-backports"; exit 1; }
  log "adding ${codename}-backports from ${uris}"
  printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uris" "$codename" | as_root tee "$backports_file" >/dev/null
  backports_added=1
  apt_updated=0
}

if ! valkey_ok; then
  add_backports
  if ! apt_update; then
    # A source that does not work would fail every later apt-get update on the machine.
    if [ "$backports_added" = 1 ]; then as_root rm -f "$backports_file"; fi
    log "apt-get update failed"
    exit 1
  fi
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  log "installing valkey-server from ${codename}-backports"
  apt_install -t "${codename}-backports" valkey-server >/dev/null
  # The package starts a system-wide service on 6379; matchd runs its own private servers.
  as_root systemctl disable --now valkey-server >/dev/null 2>&1 || as_root service valkey-server stop >/dev/null 2>&1 || true
fi

if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  apt_update
  log "installing rabbitmq-server"
  apt_install rabbitmq-server >/dev/null
  as_root systemctl disable --now rabbitmq-server >/dev/null 2>&1 || as_root service rabbitmq-server stop >/dev/null 2>&1 || true
fi

# The high-availability fault kinds cut a node off with DROP rules.
if ! command -v iptables >/dev/null 2>&1; then
  apt_update
  log "installing iptables"
  apt_install iptables >/dev/null
fi

# shellcheck source=scripts/matchd-build.sh
. scripts/matchd-build.sh
ensure_node_modules
ensure_matchd
