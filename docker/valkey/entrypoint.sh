#!/bin/sh
# Runs valkey-server as the official image does: without a config file protected mode would
# refuse every client from another container, and the official image builds it off.
set -eu
if [ "${1:-}" = valkey-server ]; then
  case " $* " in
    *" --protected-mode "*) ;;
    *) set -- "$@" --protected-mode no ;;
  esac
fi
exec "$@"
