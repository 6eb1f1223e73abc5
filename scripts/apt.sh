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

# The URI of the machine's Debian archive in deb822 sources: the first enabled stanza listing
# the suite ($1) and signed by Debian's archive key, or with `any`, failing that, one whose
# URI ends in /debian (so another vendor's repository for the same codename is never taken
# for it while a better candidate exists); with `any-uri`, any enabled stanza listing it.
deb822_uri() {
  awk -v s="$1" -v mode="$2" '
    function flush() {
      if (found == "" && suite && enabled && uri != "" && (debian || mode == "any-uri" || (mode == "any" && uri ~ /\/debian\/?$/))) found = uri
    }
    function reset() { uri = ""; suite = 0; debian = 0; enabled = 1 }
    FNR == 1 { flush(); reset() }
    /^[[:space:]]*#/ { next }
    /^[[:space:]]*$/ { flush(); reset(); next }
    /^URIs:/ { uri = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) suite = 1 }
    /^Enabled:[[:space:]]*([Nn][Oo]|[Ff][Aa][Ll][Ss][Ee])/ { enabled = 0 }
    /^Signed-By:.*debian-archive-keyring/ { debian = 1 }
    END { flush(); print found }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
}

# The URI of a one-line `deb` entry for the suite ($1) in sources.list, options in brackets
# skipped: deb [signed-by=...] URI suite components.
list_uri() {
  [ -f /etc/apt/sources.list ] || return 0
  awk -v s="$1" '$1=="deb" { i=2; if ($i ~ /^\[/) { while (i<=NF && $i !~ /\]$/) i++; i++ }
    if ($(i+1)==s) { print $i; exit } }' /etc/apt/sources.list
}
