#!/usr/bin/env bash
# From a fresh clone to a running operator on the local default, in one command:
#   the virtualenv -> the local Kubernetes test bed (or $KUBECONFIG) -> CRDs -> the operator on
#   watches.yaml -> deploy/samples/foo.yaml. With --cloud, also the local OpenStack
#   (hack/local-cloud.sh) and deploy/samples/vm.yaml. The operator runs in the foreground: Ctrl-C stops it.
#   hack/run-local.sh [--cloud] [extra operator flags...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=hack/lib/log.sh
. hack/lib/log.sh run-local
cloud=0
if [ "${1:-}" = "--cloud" ]; then cloud=1; shift; fi

bin=$(hack/bootstrap.sh | tail -n 1)
export PATH="$bin:$PATH"
if [ -z "${KUBECONFIG:-}" ]; then
  KUBECONFIG=$(hack/local-cluster.sh up | tail -n 1)
  export KUBECONFIG
fi
eval "$(hack/local-cluster.sh env | grep PATH)"
log "cluster: $KUBECONFIG"
kubectl apply --server-side -k deploy/crds >&2
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null

if [ "$cloud" = 1 ]; then
  OS_CLIENT_CONFIG_FILE=$(hack/local-cloud.sh up | tail -n 1)
  export OS_CLIENT_CONFIG_FILE OS_CLOUD=${OS_CLOUD:-local}
  log "cloud: $OS_CLOUD in $OS_CLIENT_CONFIG_FILE"
fi

# A new private directory: a fixed name in a shared temporary dir could be planted (a symbolic link) by
# another user to make tee write wherever they like.
logdir=$(mktemp -d "${TMPDIR:-/tmp}/hybrid-operator-run-local.XXXXXX")
logfile=$logdir/operator.log
mkfifo "$logdir/output"
log "starting the operator (log: $logfile)"
# tee ignores Ctrl-C (it reaches the whole process group): it must stay to pass on the operator's last lines,
# its stop, to the terminal and the log; this script waits for it before it ends.
(trap '' INT && exec tee "$logfile" >&2) < "$logdir/output" &
teepid=$!
hybrid-operator run --watches-file watches.yaml --health-probe-bind-address 127.0.0.1:0 \
  --metrics-bind-address 127.0.0.1:0 "$@" > "$logdir/output" 2>&1 &
pid=$!
# Ctrl-C reaches the operator too (one process group): the SIGTERM on top of it may come at any moment, and
# the operator's stop takes both. Then this script ends with it, wherever it was, once tee has passed on
# the operator's last line.
finish() {
  local code=0
  wait "$pid" || code=$?
  wait "$teepid" 2>/dev/null || true
  exit "$code"
}
trap 'kill -TERM $pid 2>/dev/null; finish' INT TERM
sleep 2
kubectl apply -f deploy/samples/foo.yaml >&2
if [ "$cloud" = 1 ]; then kubectl apply -f deploy/samples/vm.yaml >&2; fi
# Kinds named with their group: another project's kind of the same name may be installed on the bed.
foos=foos.samplecontroller.k8s.io
kinds=$foos,deployments.apps
if [ "$cloud" = 1 ]; then kinds=$kinds,virtualmachines.cloudnative.tw; fi
log "applied the samples; watch them with: KUBECONFIG=$KUBECONFIG kubectl get $kinds -w"
for _ in $(seq 60); do
  # The operator gone (Ctrl-C reaches it directly; bash may not run its INT trap when the foreground kubectl
  # or sleep handled the same SIGINT itself): stop waiting and end with it.
  kill -0 "$pid" 2>/dev/null || finish
  if kubectl get "$foos" example-foo -o jsonpath='{.status.availableReplicas}' 2>/dev/null | grep -q '[1-9]'; then
    kubectl get "$foos,deployments.apps" >&2
    break
  fi
  sleep 1
done
log "the operator keeps running; Ctrl-C stops it"
finish
