#!/usr/bin/env bash
# The main job (`npm run demo`): installs what is missing, then runs the durable
# full-pipeline benchmark on a private local stack that the bench starts and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
exec ./matchd bench full-pipeline "$@"
