# Shared by setup.sh and test-docker.sh (sourced, not run): the node modules, installed when
# missing or older than the lock file, and ./matchd, built when missing or older than src/ or
# bench/ (whose results do not count).
# Both need `log` from the caller.

ensure_node_modules() {
  if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "installing node modules"
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
  fi
}

ensure_matchd() {
  if [ ! -x ./matchd ] || [ -n "$(find src bench package-lock.json -path bench/results -prune -o -newer ./matchd -print -quit 2>/dev/null)" ]; then
    log "building ./matchd"
    npm run --silent build >/dev/null
  fi
}
