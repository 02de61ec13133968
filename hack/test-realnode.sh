#!/usr/bin/env bash
# The real-node tests, as hack/test.sh runs them after the images (root on Debian; one real node per
# machine, so no other bed may hold it):
#
#   hack/test-realnode.sh [ARCHIVE]   ARCHIVE: the operator image (default build/images/hybrid-operator.oci.tar,
#                                     what hack/build-image.sh prints)
#
# 1. a footprint of the host (tests/realnode/footprint.py: iptables, links, netns, mounts, cgroups, node
#    processes, sysctls, paths);
# 2. a bed of its own with a real node (LOCAL_CLUSTER_NAME=${HYBRID_OPERATOR_REALNODE_BED:-realnode}),
#    `hack/local-cluster.sh up --real-node`, the image loaded as hybrid-operator:latest (deploy/'s name);
# 3. pytest -m realnode tests/realnode/test_real_node.py on it: deploy/ applied unchanged, the Foo sample,
#    its nginx through a Service, logs and exec; then tests/realnode/test_replicas.py: metrics auth from a
#    pod, leader failover, a rolling upgrade (the archive loaded again as hybrid-operator:v2), the sharded
#    overlay; then the real-node tests of tests/integration (exec, cp, logs and port-forward through the
#    run proxy; operator-sdk's advanced-molecule subresourcestest);
# 4. `molecule test -s cluster` against the bed (HYBRID_OPERATOR_IMAGE_LOADER=local-cluster: the image
#    built, cached, and loaded with `hack/local-cluster.sh load`);
# 5. `down`, then tests/realnode/test_leaves_nothing.py: the host as the footprint found it.
# The bed is brought down on failure too (HYBRID_OPERATOR_KEEP_TESTBED=1 keeps it to look at). Each
# part's time is printed at the end.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=hack/lib/log.sh
. "$root/hack/lib/log.sh" test-realnode
archive=${1:-build/images/hybrid-operator.oci.tar}
[ -r "$archive" ] || die "no image archive $archive: run hack/build-image.sh first"
command -v pytest >/dev/null || die "pytest is not on PATH: export PATH=\$PWD/.venv/bin:\$PATH (hack/bootstrap.sh makes it)"
python=$(dirname "$(command -v pytest)")/python # the venv's, beside its pytest
export LOCAL_CLUSTER_NAME=${HYBRID_OPERATOR_REALNODE_BED:-realnode}
unset LOCAL_CLUSTER_DIR LOCAL_CLUSTER_PORT

times=()
timed() { # description command...
  local start=$SECONDS
  "${@:2}"
  times+=("$(printf '%5d s  %s' $((SECONDS - start)) "$1")")
}

bed_up=0
cleanup() {
  if [ "$bed_up" = 1 ] && [ -z "${HYBRID_OPERATOR_KEEP_TESTBED:-}" ]; then hack/local-cluster.sh down || true; fi
}
trap cleanup EXIT

mkdir -p build
before=build/realnode-footprint-before.json
"$python" -m tests.realnode.footprint >"$before"
bed_up=1
timed "up --real-node (bed $LOCAL_CLUSTER_NAME)" hack/local-cluster.sh up --real-node >/dev/null
timed "load $archive" hack/local-cluster.sh load "$archive" hybrid-operator:latest >/dev/null
kubeconfig=$(hack/local-cluster.sh env | sed -n 's/^export KUBECONFIG=//p')
timed "pytest -m realnode: deploy/ on the real node" \
  env KUBECONFIG="$kubeconfig" pytest -p no:cacheprovider -ra -m realnode tests/realnode/test_real_node.py
timed "pytest -m realnode: metrics auth, leader failover, rolling upgrade, sharded" \
  env KUBECONFIG="$kubeconfig" HYBRID_OPERATOR_IMAGE_ARCHIVE="$archive" \
  pytest -p no:cacheprovider -ra -m realnode tests/realnode/test_replicas.py
# The operator run from this checkout against the real node: its roles' k8s_exec, k8s_cp, k8s_log and a
# port-forward through the run proxy, and operator-sdk's advanced-molecule subresourcestest (exec and logs).
timed "pytest -m realnode: exec, cp, logs, port-forward through the run proxy; advanced-molecule subresources" \
  env KUBECONFIG="$kubeconfig" pytest -p no:cacheprovider -ra -m realnode \
  tests/integration/test_proxy_streams.py tests/integration/test_upstream_advanced.py
# The bed's kubectl first on PATH: converge's kustomize lookup runs `kubectl kustomize`.
bed_bin=$(hack/local-cluster.sh env | sed -n 's/^export PATH=\([^:]*\):.*/\1/p')
timed "molecule test -s cluster" \
  env KUBECONFIG="$kubeconfig" PATH="$bed_bin:$PATH" HYBRID_OPERATOR_IMAGE_LOADER=local-cluster molecule test -s cluster
timed "down" hack/local-cluster.sh down
bed_up=0
timed "down left nothing" env HYBRID_OPERATOR_REALNODE_BEFORE="$before" \
  pytest -p no:cacheprovider -ra -m realnode tests/realnode/test_leaves_nothing.py
printf '%s\n' "${times[@]}"
