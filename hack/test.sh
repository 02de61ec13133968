#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   lint and types -> unit tests -> integration tests on a real API server -> the images (built by
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
#   hack/test.sh [pytest args...]
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

started_bed=0
if [ -z "${KUBECONFIG:-}" ]; then
  step "local Kubernetes test bed"
  KUBECONFIG=$(hack/local-cluster.sh up | tail -n 1)
  export KUBECONFIG
  started_bed=1
fi
cleanup() {
  if [ "$started_bed" = 1 ] && [ -z "${HYBRID_OPERATOR_KEEP_TESTBED:-}" ]; then
    hack/local-cluster.sh down || true
  fi
}
trap cleanup EXIT
eval "$(hack/local-cluster.sh env | grep PATH)"

step "pytest: unit, integration, cloud"
markers=(-m "not image and not realnode")
if [ -n "${HYBRID_OPERATOR_SKIP_CLOUD:-}" ]; then markers=(-m "not cloud and not image and not realnode"); fi
pytest -p no:cacheprovider -ra --durations=25 "${markers[@]}" "$@"

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
