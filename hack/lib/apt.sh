# shellcheck shell=bash
# Debian packages for the scripts under hack/, installed only when missing and only as root on Debian.
# Source hack/lib/log.sh first (errors die).
#
#   apt_install "promtool and prometheus" prometheus     # the first argument says what they are for
#
# A package may bring a service of its own (prometheus, docker-registry): a policy-rc.d forbids every
# start during the install, and where systemd runs, the services named in APT_DISABLE_SERVICES are
# disabled afterwards, so nothing of them runs or comes back at boot; only the binaries are used.
apt_install() { # what-for package...
  local what=$1
  shift
  [ "$#" -gt 0 ] || return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    die "$what: missing packages $*: install them (Debian: apt-get install $*) or run as root on Debian"
  fi
  log "installing $* with apt-get ($what)"
  local policy=/usr/sbin/policy-rc.d made_policy=0 rc=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
  fi
  apt-get update -qq >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 || rc=$?
  [ "$made_policy" = 0 ] || rm -f "$policy"
  [ "$rc" -eq 0 ] || die "apt-get install $* failed (exit $rc)"
  local service
  if [ -d /run/systemd/system ]; then
    for service in ${APT_DISABLE_SERVICES:-}; do
      systemctl disable --now "$service" >/dev/null 2>&1 || true
    done
  fi
}
