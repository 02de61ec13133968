# shellcheck shell=bash
# Prometheus' own binaries for the tests: promtool (`promtool test rules` on deploy/prometheus/rules.yaml)
# and prometheus (tests/integration/test_prometheus.py starts one on loopback). Source hack/lib/log.sh first.
#
# From Debian's `prometheus` package when they are missing and we are root on Debian; otherwise one line
# saying what to install. The package would start and enable its own service (listening on :9090): a
# policy-rc.d forbids the start during the install, and the service is disabled afterwards, so nothing of
# it runs or comes back at boot; only the binaries are used.
ensure_prometheus() {
  command -v promtool >/dev/null && command -v prometheus >/dev/null && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    die "promtool and prometheus are missing: install them (Debian: apt-get install prometheus; or the release tarball from prometheus.io on PATH) or run as root on Debian"
  fi
  log "installing prometheus (for promtool and the integration test) with apt-get; its service stays off"
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
  fi
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2 || {
    [ "$made_policy" = 0 ] || rm -f "$policy"
    die "apt-get install prometheus failed"
  }
  [ "$made_policy" = 0 ] || rm -f "$policy"
  if [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
  if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    die "the prometheus package installed no promtool or prometheus"
  fi
}
