#!/bin/sh
# A Valkey data node or Sentinel of compose.ha.yaml. Each writes its config file into its
# /data volume on the first start only: Sentinel rewrites these files when it promotes a
# replica or demotes a primary, so a restarted container keeps the role it was given.
# Usage: ha.sh node NAME [PRIMARY] | ha.sh sentinel NAME PRIMARY
# Every address is a compose host name: a container's IP changes when it is recreated.
set -eu
role=$1 name=$2 primary=${3:-}
conf=/data/$role.conf
if [ ! -f "$conf" ]; then
  case $role in
    node)
      printf '%s\n' "port 6379" "protected-mode no" "appendonly yes" "appendfsync always" \
        "hz 500" "auto-aof-rewrite-percentage 300" 'save ""' "replica-announce-ip $name"
      if [ -n "$primary" ]; then printf 'replicaof %s 6379\n' "$primary"; fi
      ;;
    sentinel)
      # Down after 5 s without a valid answer, quorum 2 of 3; matchd's replica lag limit
      # follows down-after (docs/durability.md).
      printf '%s\n' "port 26379" "protected-mode no" "sentinel resolve-hostnames yes" \
        "sentinel announce-hostnames yes" "sentinel announce-ip $name" \
        "sentinel monitor matchd $primary 6379 2" \
        "sentinel down-after-milliseconds matchd 5000" \
        "sentinel failover-timeout matchd 30000" \
        "sentinel parallel-syncs matchd 1"
      ;;
    *) echo "ha.sh: unknown role $role" >&2; exit 2 ;;
  esac >"$conf.tmp"
  mv "$conf.tmp" "$conf"
fi
# Through the image's own entrypoint: the official one drops root to the valkey user.
if [ "$role" = sentinel ]; then
  exec docker-entrypoint.sh valkey-server "$conf" --sentinel
fi
exec docker-entrypoint.sh valkey-server "$conf"
