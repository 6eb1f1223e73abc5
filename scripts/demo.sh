#!/usr/bin/env bash
# The main job (`npm run demo`): installs what is missing, then finds the highest rate the
# durable full pipeline sustains (with its p50 and p99, and the rate within p99 <= 25 ms beside
# it), then measures its closed-loop maximum, each on a private local stack the bench starts
# and stops.
# Flags given (`npm run demo -- --json`) go to both runs; the exit is 1 if either failed.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# The bench process too keeps freed pages, as the services it starts do (docs/operations.md).
export MIMALLOC_PURGE_DELAY="${MIMALLOC_PURGE_DELAY:--1}"
failed=0
./matchd bench capacity "$@" || failed=1
./matchd bench full-pipeline "$@" || failed=1
exit "$failed"
