# shellcheck shell=bash
# Prometheus' own binaries for the tests: promtool (`promtool test rules` on deploy/prometheus/rules.yaml)
# and prometheus (tests/integration/test_prometheus.py starts one on loopback). Source hack/lib/log.sh
# and hack/lib/apt.sh first.
#
# From Debian's `prometheus` package when they are missing and we are root on Debian; otherwise one line
# saying what to install. The package would start and enable its own service (listening on :9090):
# apt_install forbids the start during the install and disables the service afterwards, so nothing of it
# runs or comes back at boot; only the binaries are used.
ensure_prometheus() {
  command -v promtool >/dev/null && command -v prometheus >/dev/null && return 0
  APT_DISABLE_SERVICES=prometheus.service apt_install "promtool and prometheus, for the alert rules' tests" prometheus
  if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    die "the prometheus package installed no promtool or prometheus"
  fi
}
