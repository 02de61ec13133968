#!/usr/bin/env bash
# A real, single-node Kubernetes control plane on loopback, built from source.
#
#   hack/local-cluster.sh up       build (first time only), start, print the admin kubeconfig path last
#   hack/local-cluster.sh up --real-node   the same plus a real node (containerd, kubelet, kube-proxy; root,
#                                  Debian; one per machine): pods run as real containers (hack/lib/realnode.sh)
#   hack/local-cluster.sh load ARCHIVE [NAME]  import an image archive into the real node's containerd
#   hack/local-cluster.sh down     stop every process started here (by pid file) and remove the state
#   hack/local-cluster.sh status   what runs, on which ports, with which versions
#   hack/local-cluster.sh env      shell lines to eval: KUBECONFIG and a PATH with our own kubectl first
#                                  (a real-node bed: also CONTAINERD_ADDRESS/NAMESPACE for ctr)
#   hack/local-cluster.sh build    only build (or check) the cached binaries
#   hack/local-cluster.sh restart C  stop component C (SIGTERM, SIGKILL after a short grace), start it again
#                                  with the same data and ports, wait until it is ready
#   hack/local-cluster.sh kill C   SIGKILL component C and leave it down (`up` or `restart C` brings it back)
#   hack/local-cluster.sh compact  compact etcd's history at its current revision; prints the revision
#
# Components (C): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok; on a real-node bed
# also containerd, registry, kubelet, kube-proxy. `up` on a bed with stopped components starts just those,
# with the same data and ports (a real-node bed stays one: its state says so).
#
# What runs: etcd, kube-apiserver (TLS, RBAC, service-account signing key), kube-controller-manager,
# kube-scheduler and kwok (fake nodes that make pods Running and Ready). Versions are pinned in
# hack/versions.env; binaries are built with Go through the module proxy and cached, keyed by version,
# under ${XDG_CACHE_HOME:-~/.cache}/hybrid-operator/. The first build takes a while on 2 cores; later
# `up`s reuse the binaries and are ready in seconds.
#
# Environment:
#   LOCAL_CLUSTER_NAME   name of this test bed (default "default"); two names run side by side
#   LOCAL_CLUSTER_DIR    state directory (default <cache>/clusters/<name>)
#   LOCAL_CLUSTER_PORT   apiserver port (default: a free port)
#   LOCAL_CLUSTER_STOP_GRACE  seconds `restart` waits after SIGTERM before SIGKILL (default 5)
#   LOCAL_CLUSTER_CONTROLLER_QPS  requests per second each of kube-controller-manager's controllers may
#                        send (default 20, its own default; burst 1.5x): at 20, making 10,000 Deployments
#                        available takes the deployment and replicaset controllers most of an hour
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib/log.sh
. "$here/lib/log.sh" local-cluster
# shellcheck source=hack/lib/proc.sh
. "$here/lib/proc.sh"
# shellcheck source=hack/lib/apt.sh
. "$here/lib/apt.sh"
# shellcheck source=hack/lib/template.sh
. "$here/lib/template.sh"
# shellcheck source=hack/versions.env
. "$here/versions.env"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-operator
name=${LOCAL_CLUSTER_NAME:-default}
state=${LOCAL_CLUSTER_DIR:-$cache/clusters/$name}
k8s_bin=$cache/bin/kubernetes-$KUBERNETES_VERSION
etcd_bin=$cache/bin/etcd-$ETCD_VERSION
kwok_bin=$cache/bin/kwok-$KWOK_VERSION
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

export GOTOOLCHAIN=${GOTOOLCHAIN_OVERRIDE:-auto}
export GOFLAGS="-buildvcs=false -trimpath"

# Building the binaries (cached, keyed by version): hack/lib/k8s-build.sh. The real node: hack/lib/realnode*.sh.
# shellcheck source=hack/lib/k8s-build.sh
. "$here/lib/k8s-build.sh"
# shellcheck source=hack/lib/realnode.sh
. "$here/lib/realnode.sh"
# shellcheck source=hack/lib/realnode-images.sh
. "$here/lib/realnode-images.sh"
is_real_node && components+=("${node_components[@]}")

# ---------------------------------------------------------------------------------------------- state

pidfile() { echo "$state/run/$1.pid"; }

# A pid is ours while it lives, is not a zombie waiting to be reaped, and names this bed's state dir on its
# command line (every component gets a path under it): a pid file left behind never makes us signal a
# stranger that reused the number.
alive() {
  pid_alive "$1" || return 1
  [ -r "/proc/$1/stat" ] || return 0 # no procfs: kill -0 is all we can ask
  grep -qaF "$state/" "/proc/$1/cmdline" 2>/dev/null
}

running() { # component -> 0 if its recorded pid is alive
  local f
  f=$(pidfile "$1")
  [ -f "$f" ] && alive "$(cat "$f")"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

port_of() { sed -n "s/^$1=//p" "$state/ports" 2>/dev/null; }

# ---------------------------------------------------------------------------------------------- PKI

# shellcheck source=hack/lib/pki.sh
. "$here/lib/pki.sh"

# ---------------------------------------------------------------------------------------------- up

# A component keeps no descriptor of its caller's: one it inherited (the lock of a `flock LOCK hack/...`, a
# test runner's pipe) would stay held for as long as the bed runs, and `flock` would never be released.
start_bg() { # component logfile command...
  local what=$1 logfile=$2
  shift 2
  (
    for fd in /proc/self/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec nohup "$@" >>"$logfile" 2>&1 </dev/null
  ) &
  echo $! >"$(pidfile "$what")"
}

wait_for() { # description seconds command...
  wait_until "$2" "${@:3}" || die "$1 not ready after ${2}s; logs in $state/logs"
}

# One function per component: start it from what $state holds (its ports, etcd's data, the certificates),
# so `up` and `restart` start each the same way, and a restarted component comes back where it was.
start_etcd() {
  log "starting etcd $ETCD_VERSION on 127.0.0.1:$(port_of etcd)"
  start_bg etcd "$state/logs/etcd.log" "$etcd_bin/etcd" \
    --name local --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$(port_of etcd)" --advertise-client-urls "http://127.0.0.1:$(port_of etcd)" \
    --listen-peer-urls "http://127.0.0.1:$(port_of etcd-peer)" \
    --initial-advertise-peer-urls "http://127.0.0.1:$(port_of etcd-peer)" \
    --initial-cluster "local=http://127.0.0.1:$(port_of etcd-peer)" \
    --unsafe-no-fsync --quota-backend-bytes 4294967296 --log-level warn
}

start_kube_apiserver() {
  local pki=$state/pki
  log "starting kube-apiserver $KUBERNETES_VERSION on https://127.0.0.1:$(port_of apiserver)"
  start_bg kube-apiserver "$state/logs/kube-apiserver.log" "$k8s_bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$(port_of etcd)" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$(port_of apiserver)" \
    --tls-cert-file "$pki/server.crt" --tls-private-key-file "$pki/server.key" \
    --client-ca-file "$pki/ca.crt" \
    --authorization-mode RBAC \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-cluster-ip-range 10.96.0.0/16 \
    --endpoint-reconciler-type none \
    --allow-privileged=true \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP,Hostname
}

start_kube_controller_manager() {
  local pki=$state/pki kc=$state/kube-controller-manager.kubeconfig qps=${LOCAL_CLUSTER_CONTROLLER_QPS:-20}
  log "starting kube-controller-manager on 127.0.0.1:$(port_of controller-manager)"
  start_bg kube-controller-manager "$state/logs/kube-controller-manager.log" "$k8s_bin/kube-controller-manager" \
    --kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$(port_of controller-manager)" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials=true \
    --kube-api-qps "$qps" --kube-api-burst "$((qps * 3 / 2))" \
    --node-monitor-grace-period 5m \
    --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
    --leader-elect=false
}

start_kube_scheduler() {
  local kc=$state/kube-scheduler.kubeconfig
  log "starting kube-scheduler on 127.0.0.1:$(port_of scheduler)"
  start_bg kube-scheduler "$state/logs/kube-scheduler.log" "$k8s_bin/kube-scheduler" \
    --kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$(port_of scheduler)" --leader-elect=false
}

start_kwok() {
  log "starting kwok on 127.0.0.1:$(port_of kwok)"
  start_bg kwok "$state/logs/kwok.log" "$kwok_bin/kwok" \
    --kubeconfig "$state/admin.kubeconfig" \
    --config "$kwok_bin/stages.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds 40 \
    --cidr 10.0.0.1/16 --node-ip 10.0.0.1 \
    --server-address "127.0.0.1:$(port_of kwok)"
}

healthy() { # component: 0 if it answers its health check now
  local pki=$state/pki
  case $1 in
  etcd) curl -fsS --max-time 3 "http://127.0.0.1:$(port_of etcd)/health" ;;
  kube-apiserver)
    curl -fsS --max-time 3 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      "https://127.0.0.1:$(port_of apiserver)/readyz"
    ;;
  kube-controller-manager) curl -kfsS --max-time 3 "https://127.0.0.1:$(port_of controller-manager)/healthz" ;;
  kube-scheduler) curl -kfsS --max-time 3 "https://127.0.0.1:$(port_of scheduler)/healthz" ;;
  kwok) curl -fsS --max-time 3 "http://127.0.0.1:$(port_of kwok)/healthz" ;;
  *) return 0 ;; # the real node's: realnode_wait_ready knows how to ask them
  esac
}

wait_ready() { # component: until it answers its health check
  case $1 in
  etcd) wait_for etcd 30 healthy etcd ;;
  kube-apiserver) wait_for kube-apiserver 90 healthy kube-apiserver ;;
  kube-controller-manager | kube-scheduler | kwok) wait_for "$1" 60 healthy "$1" ;;
  *) realnode_wait_ready "$1" ;;
  esac
}

start_component() { # component: start it and wait until it is ready
  "start_${1//-/_}"
  wait_ready "$1"
}

# SIGTERM, then SIGKILL after a short grace: kube-apiserver has been seen draining for 60 s, and a test bed
# gains nothing from waiting. The pid file goes once the process is gone, so its ports are free again.
stop_component() { # component grace-seconds (0: SIGKILL at once)
  local f pid grace=$2
  f=$(pidfile "$1")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if alive "$pid"; then
    if [ "$grace" -gt 0 ]; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq $((grace * 10))); do
        alive "$pid" || break
        sleep 0.1
      done
    fi
    if alive "$pid"; then
      [ "$grace" -gt 0 ] && log "$1 still running ${grace}s after SIGTERM: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    for _ in $(seq 100); do
      alive "$pid" || break
      sleep 0.1
    done
    for _ in $(seq 30); do # a zombie holds nothing, but is gone for good once reaped
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$f"
}

stop_components() { # grace-seconds component...: stop_component for each, all at once
  local grace=$1 c
  shift
  for c in "$@"; do stop_component "$c" "$grace" & done
  wait
}

# Room for 10,000 pods: the benchmark's 1,000 Foos ask for up to 3,000 (at 1,000 half of them stayed Pending).
node_manifest() {
  cat <<'YAML'
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: kwok-node-0, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "10000"}
  capacity: {cpu: "64", memory: 256Gi, pods: "10000"}
YAML
}

all_running() {
  local c
  for c in "${components[@]}"; do running "$c" || return 1; done
}

all_healthy() {
  local c
  for c in "${components[@]}"; do healthy "$c" >/dev/null 2>&1 || return 1; done
}

# A component whose recorded process still runs but does not answer its health check is on its way out
# (signalled, and draining on its ports: kube-apiserver has been seen taking 50 s) or wedged. Started beside
# it, a new one would find its ports taken, or its clients would talk to the old one until it is gone ("not
# ready after 60s"): stop it, and wait until it is gone, before starting it again.
stop_unhealthy() {
  local c
  for c in "${components[@]}"; do
    if running "$c" && ! healthy "$c" >/dev/null 2>&1; then
      log "$c (pid $(cat "$(pidfile "$c")")) runs but does not answer: stopping it before starting it again"
      stop_component "$c" "${LOCAL_CLUSTER_STOP_GRACE:-5}"
    fi
  done
}

# A bed whose components can come back as they were: its ports, etcd's data and the certificates are all
# there (a bed made before the peer port was recorded cannot, and is started afresh).
resumable() {
  [ -f "$state/admin.kubeconfig" ] && [ -d "$state/etcd" ] && [ -f "$state/pki/sa.pub" ] && [ -n "$(port_of etcd-peer)" ]
}

# Ports and kubeconfigs for a new bed; LOCAL_CLUSTER_PORT fixes the apiserver's.
plan_ports() {
  local api_port who
  api_port=${LOCAL_CLUSTER_PORT:-$(free_port)}
  printf 'etcd=%s\netcd-peer=%s\napiserver=%s\ncontroller-manager=%s\nscheduler=%s\nkwok=%s\n' \
    "$(free_port)" "$(free_port)" "$api_port" "$(free_port)" "$(free_port)" "$(free_port)" >"$state/ports"
  for who in admin user kube-controller-manager kube-scheduler; do kubeconfig_for "$who" "$api_port"; done
}

cmd_up() {
  case ${1:-} in
  "") ;;
  --real-node) real_node=1 ;;
  *) die "usage: $0 up [--real-node]" ;;
  esac
  if is_real_node || [ -n "${real_node:-}" ]; then
    real_node=1
    realnode_preflight
    realnode_lock # here already, so a bed that cannot have the node says so before any build
    [[ " ${components[*]} " == *" kubelet "* ]] || components+=("${node_components[@]}")
  fi
  build_all
  [ -z "${real_node:-}" ] || realnode_build
  if [ -f "$state/admin.kubeconfig" ] && all_running && all_healthy; then
    log "already running (name $name)"
    echo "$state/admin.kubeconfig"
    return 0
  fi
  local started=$SECONDS c
  if resumable; then
    log "some components stopped; starting them again with their data and ports (name $name)"
    stop_unhealthy
  else
    if [ -d "$state/run" ]; then
      log "some components stopped and the bed cannot be resumed; starting it afresh"
      cmd_down keep-pki
    fi
    mkdir -p "$state/run" "$state/logs" "$state/etcd"
    make_pki
    plan_ports
  fi
  pki_current
  [ -z "${real_node:-}" ] || realnode_lock
  mkdir -p "$state/run" "$state/logs"
  # etcd before the apiserver before its clients; the three clients start together and are waited for after.
  for c in etcd kube-apiserver; do running "$c" || start_component "$c"; done
  local waiting=()
  for c in kube-controller-manager kube-scheduler kwok; do
    running "$c" && continue
    "start_${c//-/_}"
    waiting+=("$c")
  done
  for c in ${waiting[@]+"${waiting[@]}"}; do wait_ready "$c"; done

  local kubectl=("$k8s_bin/kubectl" --kubeconfig "$state/admin.kubeconfig")
  node_manifest >"$state/node.yaml"
  wait_for "node registration" 30 "${kubectl[@]}" apply -f "$state/node.yaml"
  wait_for "node Ready" 60 "${kubectl[@]}" wait --for=condition=Ready node/kwok-node-0 --timeout=2s
  wait_for "default service account" 60 "${kubectl[@]}" get serviceaccount default -n default
  is_real_node && realnode_up
  log "ready in $((SECONDS - started))s: kubectl --kubeconfig $state/admin.kubeconfig get nodes"
  echo "$state/admin.kubeconfig"
}

component_arg() { # the component named on the command line, or die
  local c
  for c in "${components[@]}"; do [ "${1:-}" = "$c" ] && return 0; done
  is_real_node || [[ " ${node_components[*]} " != *" ${1:-} "* ]] || die "test bed '$name' has no real node"
  die "name one of: ${components[*]}"
}

# Fault injection for the reliability tests: one component stopped (and started again) while the rest run.
cmd_restart() {
  component_arg "${1:-}"
  resumable || die "test bed '$name' is not up (or was made by an older version of this script: down, then up)"
  local started=$SECONDS
  stop_component "$1" "${LOCAL_CLUSTER_STOP_GRACE:-5}"
  start_component "$1"
  log "$1 restarted and ready in $((SECONDS - started))s"
}

cmd_kill() {
  component_arg "${1:-}"
  stop_component "$1" 0
  log "$1 killed (SIGKILL); \`$0 up\` or \`$0 restart $1\` starts it again"
}

# Compact etcd's history up to its current revision, through etcd's own HTTP gateway (no etcdctl needed).
# Prints the revision.
cmd_compact() {
  running etcd || die "etcd of test bed '$name' is not running"
  local url rev
  url="http://127.0.0.1:$(port_of etcd)/v3/kv"
  rev=$(curl -fsS -X POST "$url/range" -d '{"key": "AA=="}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
  curl -fsS -X POST "$url/compaction" -d "{\"revision\": \"$rev\", \"physical\": true}" >/dev/null
  log "etcd compacted at revision $rev"
  echo "$rev"
}

cmd_down() {
  local keep=${1:-} c
  realnode_down
  # etcd last, the rest together (each takes a second or two to shut down cleanly)
  stop_components 5 kwok kube-scheduler kube-controller-manager kube-apiserver
  stop_component etcd 5
  if [ "$keep" = keep-pki ]; then
    rm -rf "$state/etcd" "$state/run" "$state/ports" "$node_dir" "$state/real-node"
  else
    rm -rf "$state"
  fi
  log "stopped (name $name)"
}

cmd_status() {
  echo "test bed '$name' (state: $state)"
  echo "versions: kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
  local c built=yes any=0 port
  for c in "${k8s_cmds[@]}"; do [ -x "$k8s_bin/$c" ] || built=no; done
  [ -x "$etcd_bin/etcd" ] && [ -x "$kwok_bin/kwok" ] || built=no
  echo "binaries built: $built ($cache/bin)"
  for c in "${components[@]}"; do
    port=""
    [ -f "$state/ports" ] && port=$(sed -n "s/^${c#kube-}=//p" "$state/ports")
    if running "$c"; then
      any=1
      echo "  $c: running, pid $(cat "$(pidfile "$c")")${port:+, port $port}"
    else
      echo "  $c: stopped"
    fi
  done
  if [ "$any" -eq 1 ]; then
    echo "kubeconfig: $state/admin.kubeconfig (no rights: $state/user.kubeconfig)"
  fi
  if is_real_node; then
    echo "real node: $node_name ($node_ip, bridge $node_bridge); images: ctr --address $node_dir/containerd/containerd.sock -n k8s.io images ls"
  fi
  return 0
}

cmd_env() {
  echo "export KUBECONFIG=$state/admin.kubeconfig"
  echo "export PATH=$k8s_bin:\$PATH"
  if is_real_node; then # `ctr` reads these: images and containers of the real node
    echo "export CONTAINERD_ADDRESS=$node_dir/containerd/containerd.sock CONTAINERD_NAMESPACE=k8s.io"
    echo "export LOCAL_CLUSTER_REAL_NODE=$node_name"
  fi
}

case "${1:-}" in
up) cmd_up "${2:-}" ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
build) build_all ;;
restart) cmd_restart "${2:-}" ;;
kill) cmd_kill "${2:-}" ;;
compact) cmd_compact ;;
load) cmd_load "${2:-}" "${3:-}" ;;
*) die "usage: $0 up [--real-node]|down|status|env|build|restart <component>|kill <component>|compact|load ARCHIVE [NAME]" ;;
esac
