#!/bin/bash
# The image's HEALTHCHECK: GET /healthz on MATCHING_HTTP_PORT, else on the conductor's 3002,
# the outbox's 3035 or the feed's 3040. Plain bash over /dev/tcp, so the image needs no curl.
set -euo pipefail

probe() {
  local status
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  IFS=' ' read -r -t 2 _ status _ <&3 || return 1
  exec 3<&-
  [ "$status" = 200 ]
}

if [ -n "${MATCHING_HTTP_PORT:-}" ]; then
  probe "$MATCHING_HTTP_PORT" 2>/dev/null
else
  probe 3002 2>/dev/null || probe 3035 2>/dev/null || probe 3040 2>/dev/null
fi
