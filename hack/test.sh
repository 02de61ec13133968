#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   lint and types -> unit tests -> integration tests on a real API server (side by side on pytest-xdist
#   workers, then the serial ones) -> the images (built by
#   hack/build-image.sh, run on the test bed) -> the real node (hack/test-realnode.sh: deploy/ on a bed
#   with a real kubelet and containerd) -> Molecule (default scenario)
#   -> the other supported ansible-core minors -> the canary (newest ansible-core; never fails CI)
# promtool and prometheus (the alert rules' tests, a real Prometheus in the integration tests) come from
# Debian's prometheus package, installed when missing if we are root on Debian (hack/lib/prometheus.sh).
# Integration tests use $KUBECONFIG when you point it at a cluster of your own; otherwise this script
# brings up the local test bed (hack/local-cluster.sh, built from source and cached on first use) and
# stops it again at the end. OpenStack tests use $OS_CLOUD if set, else the local cloud
# (hack/local-cloud.sh); HYBRID_OPERATOR_SKIP_CLOUD=1 skips them. The image step needs root on Debian (or
# Docker/Podman with registry access); HYBRID_OPERATOR_SKIP_IMAGE=1 skips it, saying so. If the images
# cannot be built, the run fails. The real-node step needs root on Debian and the image;
# HYBRID_OPERATOR_SKIP_REALNODE=1 skips it, saying so. The matrix and the canary are hack/test-matrix.sh;
# HYBRID_OPERATOR_SKIP_MATRIX=1 skips both. Each step's time is printed at the end.
#   hack/test.sh [pytest args...]   (given to each pytest part)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin=$(hack/bootstrap.sh | tail -n 1)
export PATH="$bin:$PATH"
timings=()
step_name="" step_started=$SECONDS
step() {
  [ -z "$step_name" ] || timings+=("$(printf '%5d s  %s' $((SECONDS - step_started)) "$step_name")")
  step_name=$* step_started=$SECONDS
  printf '\n==> %s\n' "$*"
}

# shellcheck source=hack/lib/log.sh
. "$root/hack/lib/log.sh" test
# shellcheck source=hack/lib/apt.sh
. "$root/hack/lib/apt.sh"
# shellcheck source=hack/lib/prometheus.sh
. "$root/hack/lib/prometheus.sh"

started_bed=0 started_cloud=0
cleanup() {
  if [ -z "${HYBRID_OPERATOR_KEEP_TESTBED:-}" ]; then
    if [ "$started_bed" = 1 ]; then hack/local-cluster.sh down || true; fi
    if [ "$started_cloud" = 1 ] && [ "${LOCAL_CLOUD_KEEP:-}" != 1 ]; then hack/local-cloud.sh down >/dev/null 2>&1 || true; fi
  fi
}
trap cleanup EXIT
# The local OpenStack comes up in the background (a minute of its own, mostly beside the lint), unless a
# cloud of the user's is named; the OpenStack tests' session fixture finds it running and leaves it to us.
cloud_log=$(mktemp)
if [ -z "${HYBRID_OPERATOR_SKIP_CLOUD:-}${OS_CLOUD:-}${OS_CLIENT_CONFIG_FILE:-}" ] && ! hack/local-cloud.sh status >/dev/null 2>&1; then
  hack/local-cloud.sh up >"$cloud_log" 2>&1 &
  cloud_pid=$!
  started_cloud=1
fi

step "lint: ruff, mypy, yamllint, ansible-lint, hadolint, shellcheck, CRDs from the roles, the docs site, alert rules"
ruff check .
ruff format --check .
mypy
yamllint -s .
ANSIBLE_COLLECTIONS_PATH="$root/hybrid_operator/collections" ansible-lint --profile production -q roles/
hadolint Containerfile images/base/Containerfile
# Every shell script in the repository (.shellcheckrc: sourced files are followed).
shellcheck hack/*.sh hack/lib/*.sh bench/*.sh .ci/run images/base/entrypoint
hybrid-operator generate crds --check  # deploy/crds/ is what roles/*/meta says (a diff if not)
# The docs site: mkdocs build --strict into build/site/ (links and anchors checked), then every repository
# path a page names (hack/docs_paths.py).
hack/docs.sh >/dev/null
# The alerts and recording rules: valid, and each alert fires on its trouble and not on health (the
# integration test tests/integration/test_prometheus.py runs prometheus from the same package).
ensure_prometheus
promtool check rules deploy/prometheus/rules.yaml
promtool test rules tests/prometheus/rules_test.yaml

if [ -z "${KUBECONFIG:-}" ]; then
  step "local Kubernetes test bed"
  KUBECONFIG=$(hack/local-cluster.sh up | tail -n 1)
  export KUBECONFIG
  started_bed=1
fi
eval "$(hack/local-cluster.sh env | grep PATH)"

# pytest in three parts (extra arguments go to each; a part they select nothing of is skipped, exit 5):
# the unit tests on 2 workers, alone (some measure time in milliseconds); then the integration and cloud
# tests not marked serial, side by side on the one bed on $workers pytest-xdist workers (a test file, or a
# group of files, is one unit of work: tests/conftest.py and tests/integration/conftest.py say how a test
# fits); then the serial ones, alone.
workers=${HYBRID_OPERATOR_TEST_WORKERS:-4}
besides="not image and not realnode"
if [ -n "${HYBRID_OPERATOR_SKIP_CLOUD:-}" ]; then besides="not cloud and $besides"; fi
part() { # pytest arguments...
  local rc=0
  pytest -p no:cacheprovider -ra "$@" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"
}
step "pytest, unit tests (2 workers)"
part --durations=10 -n 2 --dist loadgroup -m "not integration and not cloud and $besides" "$@"
if [ "$started_cloud" = 1 ]; then
  step "local OpenStack: waiting for its start"
  wait "$cloud_pid" || { tail -n 40 "$cloud_log"; die "hack/local-cloud.sh up failed"; }
fi
step "pytest, integration and cloud tests in parallel ($workers workers on the one bed)"
# Without the zygote's payload builder: hundreds of operator and executor starts here each built the payloads
# of every module the repository's roles name, most never run by the test (558 s against 709 s for this part
# without the cloud tests). tests/integration/test_warm_prepare.py and the unit tests run it as shipped, on.
export HYBRID_OPERATOR_PREBUILD_MODULES=0
part --durations=25 -n "$workers" --dist loadgroup --no-loadscope-reorder \
  -m "(integration or cloud) and not serial and $besides" "$@"
unset HYBRID_OPERATOR_PREBUILD_MODULES
step "pytest, serial: the tests that must be alone on the bed"
part --durations=10 -m "serial and $besides" "$@"

if [ -n "${HYBRID_OPERATOR_SKIP_IMAGE:-}" ]; then
  step "images: SKIPPED (HYBRID_OPERATOR_SKIP_IMAGE is set)"
else
  step "images: build and smoke-test both (hack/build-image.sh), run the operator from the image on the bed"
  archive=$(hack/build-image.sh | tail -n 1)
  HYBRID_OPERATOR_IMAGE_ARCHIVE=$archive HYBRID_OPERATOR_REQUIRE_IMAGE=1 \
    pytest -p no:cacheprovider -ra -m image tests/integration/test_image.py
fi

if [ -n "${HYBRID_OPERATOR_SKIP_REALNODE:-}" ]; then
  step "real node: SKIPPED (HYBRID_OPERATOR_SKIP_REALNODE is set)"
elif [ -n "${HYBRID_OPERATOR_SKIP_IMAGE:-}" ]; then
  step "real node: SKIPPED (it runs the image, and HYBRID_OPERATOR_SKIP_IMAGE is set)"
else
  step "real node: deploy/ on a bed with a real kubelet and containerd, then down leaves nothing"
  hack/test-realnode.sh "$archive"
fi

step "molecule: default scenario against the test bed"
molecule test -s default

if [ -z "${HYBRID_OPERATOR_SKIP_MATRIX:-}" ]; then
  step "ansible-core matrix: the other supported minors (unit, warm executor, a Foo end to end)"
  hack/test-matrix.sh legs
  step "canary: the newest ansible-core on PyPI"
  hack/test-matrix.sh canary
fi
step "done"
printf '%s\n' "${timings[@]}"
