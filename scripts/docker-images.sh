#!/usr/bin/env bash
# Builds the local images that stand in for registry ones where no registry can be reached:
# a Debian base made by debootstrap from the machine's own Debian source, then Valkey and
# RabbitMQ from Debian's packages on it. An image already built is reused. Needs a running
# dockerd; docker/local.env names the images for the compose files.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'docker-images: %s\n' "$*" >&2; }

# The image names come from the file that gives them to the compose files.
# shellcheck source=docker/local.env
. docker/local.env
base_image=$MATCHD_BASE_IMAGE
valkey_image=$MATCHD_VALKEY_IMAGE
rabbitmq_image=$MATCHD_RABBITMQ_IMAGE
suite=bookworm

# The machine's own Debian source, by setup.sh's rules (deb822_uri, list_uri), so no
# registry host is written into the repo.
# shellcheck source=scripts/apt.sh
. scripts/apt.sh
# The first enabled stanza listing the suite ($1) and signed by Debian's archive key, else one
# whose URI ends in /debian, else a one-line entry.
suite_uri() {
  local uri
  uri=$(deb822_uri "$1" signed)
  [ -n "$uri" ] || uri=$(deb822_uri "$1" any)
  [ -n "$uri" ] || uri=$(list_uri "$1")
  printf '%s' "$uri"
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

rootfs=""
# Mount points under the rootfs, deepest first: a debootstrap cut short can leave /proc, /sys
# or device binds mounted inside the tree, and nothing may be deleted through a mount.
mounts_under() { awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r; }
remove_rootfs() {
  [ -n "$rootfs" ] && [ -d "$rootfs" ] || return 0
  local m
  for m in $(mounts_under "$rootfs"); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
  if [ -z "$(mounts_under "$rootfs")" ]; then rm -rf "$rootfs"; else log "left $rootfs: still mounted"; fi
  rootfs=""
}
cleanup() { remove_rootfs; }
trap cleanup EXIT
trap 'exit 130' INT TERM

build_base() {
  local uri security
  uri=$(suite_uri "$suite")
  [ -n "$uri" ] || { log "cannot find the machine's Debian apt source for $suite"; exit 1; }
  security=$(suite_uri "$suite-security")
  command -v debootstrap >/dev/null || { log "debootstrap is missing (apt-get install debootstrap)"; exit 1; }
  rootfs=$(mktemp -d -t matchd-rootfs-XXXXXX)
  local target="$rootfs/target"
  log "debootstrap --variant=minbase $suite from $uri (about 30 s)"
  if ! debootstrap --variant=minbase "$suite" "$target" "$uri" >"$rootfs/debootstrap.log" 2>&1; then
    tail -20 "$rootfs/debootstrap.log" >&2
    exit 1
  fi
  # Made like the official slim image: no documentation, manual pages or translations now
  # or in later installs, no apt caches, and no service started by a package's install.
  cat >"$target/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
force-unsafe-io
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
  cat >"$target/etc/apt/apt.conf.d/docker-slim" <<'EOF'
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Install-Recommends "false";
EOF
  printf '#!/bin/sh\nexit 101\n' >"$target/usr/sbin/policy-rc.d"
  chmod 755 "$target/usr/sbin/policy-rc.d"
  # The same archive as the host's; backports carries Valkey 8.
  rm -f "$target/etc/apt/sources.list"
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports\nComponents: main\n' "$uri" "$suite" "$suite" "$suite"
    printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    if [ -n "$security" ]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$security" "$suite"
      printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    fi
  } >"$target/etc/apt/sources.list.d/debian.sources"
  [ -z "$(mounts_under "$rootfs")" ] || { log "debootstrap left mounts under $rootfs"; exit 1; }
  find "$target/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  find "$target/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "${target:?}"/usr/share/{man,info,groff,linda,lintian}/* "${target:?}"/var/cache/apt/* \
    "${target:?}"/var/lib/apt/lists/* "${target:?}"/var/log/* "${target:?}"/dev/*
  find "$target/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  tar -C "$target" --numeric-owner -c . |
    docker import --change 'CMD ["bash"]' - "$base_image" >/dev/null
  remove_rootfs
}

# Builds docker/<name>/Dockerfile on the local base. With --network host its apt-get reaches
# the archive as the host does, even where the bridge network cannot.
build_on_base() {
  local image=$1 dir=$2 out
  log "building $image from Debian's packages"
  # Quiet unless it fails; --force-rm, so a failed step leaves no container behind.
  if ! out=$(docker build --force-rm --network host --build-arg "BASE=$base_image" -t "$image" "$dir" 2>&1); then
    printf '%s\n' "$out" | tail -30 >&2
    exit 1
  fi
}

started=$(date +%s)
if have_image "$base_image"; then log "reusing $base_image"; else build_base; fi
if have_image "$valkey_image"; then log "reusing $valkey_image"; else build_on_base "$valkey_image" docker/valkey; fi
if have_image "$rabbitmq_image"; then log "reusing $rabbitmq_image"; else build_on_base "$rabbitmq_image" docker/rabbitmq; fi
log "local images ready in $(($(date +%s) - started)) s"
