# Shared apt helpers for setup.sh and install-chromium.sh (sourced, not run).
# A freshly booted machine's apt timers can hold apt's locks for a while: installs wait for
# the dpkg lock (up to 5 minutes), and an update, whose lists lock that option may not
# cover, is retried for as long; any other failure (a mirror or network error) only twice.

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_wait=(-o DPkg::Lock::Timeout=300)
apt_updated=0

apt_update() {
  [ "$apt_updated" = 1 ] && return 0
  local tries=0 other=0 out
  until out=$(as_root apt-get "${apt_wait[@]}" update -qq 2>&1 >/dev/null); do
    tries=$((tries + 1))
    if printf '%s' "$out" | grep -qiE 'could not get lock|unable to lock'; then
      [ "$tries" -lt 30 ] || { printf '%s\n' "$out" >&2; return 1; }
      printf 'apt: another apt holds its lock; retrying apt-get update in 10 s\n' >&2
    else
      other=$((other + 1))
      [ "$other" -le 2 ] || { printf '%s\n' "$out" >&2; return 1; }
      printf 'apt: apt-get update failed; retrying in 10 s\n' >&2
    fi
    sleep 10
  done
  apt_updated=1
}

# Installs Debian packages quietly, first finishing any install an interrupt cut short
# (apt refuses every install until then), waiting while the apt timers hold dpkg's lock.
apt_install() {
  if [ -n "$(dpkg --audit 2>/dev/null)" ]; then
    local tries=0 out
    until out=$(as_root env DEBIAN_FRONTEND=noninteractive dpkg --configure -a 2>&1); do
      tries=$((tries + 1))
      if ! printf '%s' "$out" | grep -qi 'lock' || [ "$tries" -ge 30 ]; then
        printf '%s\n' "$out" >&2
        return 1
      fi
      sleep 10
    done
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_wait[@]}" install -y -qq "$@"
}
