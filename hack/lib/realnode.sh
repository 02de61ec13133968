# shellcheck shell=bash disable=SC2154  # state, cache, here, k8s_bin: set by hack/local-cluster.sh, which sources this
# A real node for the test bed (`hack/local-cluster.sh up --real-node`): containerd, a kubelet and
# kube-proxy on this machine, so pods run as real containers with real probes, logs, exec and Services.
# Sourced by hack/local-cluster.sh after hack/lib/{log,proc,apt,template,k8s-build}.sh; uses its state,
# cache, name, k8s_bin and its component helpers (start_bg, running, stop_component, wait_for, port_of).
# The images (pause, busybox, a fake nginx), the registry and `load` are hack/lib/realnode-images.sh.
#
# Components: containerd, registry, kubelet, kube-proxy, each with a pid file and a log like the others.
# Everything lives under $state/node/, except what only one per machine can have: the bridge hocni0 with
# 10.244.0.0/24, three iptables rules tagged with the comment hybrid-operator-node (the ClusterIP
# 10.96.0.1:443 DNATed to the loopback API server, nothing else from pods to 127/8, nothing forwarded out
# of the pod subnet), kube-proxy's chains and the kubelet's cgroups (kubepods). A lock file names the bed
# that holds them. `down` takes all of it away again and puts back the sysctls the CNI bridge plugin and
# the kubelet change (ip_forward, vm.overcommit_memory, kernel.panic, ...).

node_dir=$state/node
node_name=real-node
node_label=hybrid-operator.local/real-node
node_bridge=hocni0
node_subnet=10.244.0.0/24
node_ip=10.244.0.1
node_tag=hybrid-operator-node
node_bin=$cache/bin/kubernetes-node-$KUBERNETES_VERSION
node_templates=$here/realnode
node_lock=/run/lock/hybrid-operator-real-node
node_components=(containerd registry kubelet kube-proxy)
# What the kubelet (protectKernelDefaults: false) and the CNI bridge plugin (ip_forward) set on the host.
node_sysctls=(net.ipv4.ip_forward vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# Paths outside the state dir that containerd, the CNI plugins or the kubelet make whatever they are told
# (the kubelet's device-plugin socket dir and /var/log/containers links, containerd's shim sockets):
# `down` removes those of them that were not there before the first `up`.
node_host_paths=(/var/lib/kubelet /var/log/containers /var/log/pods /run/containerd /var/lib/cni /var/lib/cni/results /opt/containerd
  /etc/kubernetes)

is_real_node() { [ -f "$state/real-node" ]; }

ctr_node() { ctr --address "$node_dir/containerd/containerd.sock" --namespace k8s.io "$@"; }

# ---------------------------------------------------------------------------------------------- prepare

# The Debian packages a real node runs on, those missing.
realnode_missing_packages() {
  local m=() lib
  command -v containerd >/dev/null && command -v ctr >/dev/null || m+=(containerd)
  command -v runc >/dev/null || m+=(runc)
  for lib in bridge host-local portmap loopback; do [ -x "/usr/lib/cni/$lib" ] || { m+=(containernetworking-plugins) && break; }; done
  command -v iptables >/dev/null || m+=(iptables)
  command -v conntrack >/dev/null || m+=(conntrack)
  command -v docker-registry >/dev/null || m+=(docker-registry)
  command -v skopeo >/dev/null || m+=(skopeo)
  command -v podman >/dev/null || m+=(podman)
  # busybox-static's /bin/busybox goes into the images as it is: it must be a static binary.
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || m+=(busybox-static)
  command -v gcc >/dev/null && [ -f "$(gcc -print-file-name=libc.a)" ] || m+=(gcc libc6-dev)
  echo "${m[*]}"
}

# Root, the packages (apt-get when missing), working iptables: each refused in one line.
realnode_preflight() {
  [ "$(id -u)" -eq 0 ] || die "--real-node needs root (it runs containerd and a kubelet, adds a bridge and iptables rules)"
  command -v ip >/dev/null || die "--real-node needs the ip command (Debian: iproute2)"
  local missing
  missing=$(realnode_missing_packages)
  if [ -n "$missing" ]; then
    command -v apt-get >/dev/null || die "--real-node needs these Debian packages and there is no apt-get here to install them: $missing"
    # shellcheck disable=SC2086  # one package per word
    APT_DISABLE_SERVICES="containerd.service docker-registry.service" apt_install "a real node for the test bed" $missing
    missing=$(realnode_missing_packages)
    [ -z "$missing" ] || die "still missing after apt-get install: $missing"
  fi
  if ! iptables -t nat -S >/dev/null 2>&1 || ! iptables -t filter -S >/dev/null 2>&1; then
    die "--real-node needs working iptables (nat and filter tables), and \`iptables -t nat -S\` fails here"
  fi
}

# One real node per machine: the lock file names the state dir of the bed that holds it. A holder whose
# state no longer says real-node (its `down` ran, or its state dir is gone) holds nothing.
realnode_lock() {
  mkdir -p "${node_lock%/*}"
  local fd holder
  exec {fd}<"${node_lock%/*}" # the check and the write under flock(2) on the lock's dir: no file of its own
  flock "$fd"
  holder=$(cat "$node_lock" 2>/dev/null || true)
  if [ -n "$holder" ] && [ "$holder" != "$state" ] && [ -f "$holder/real-node" ]; then
    die "this machine's real node belongs to test bed '$(basename "$holder")' (state $holder); one per machine (bridge $node_bridge, $node_subnet, its iptables rules): bring that one down first (LOCAL_CLUSTER_DIR=$holder hack/local-cluster.sh down)"
  fi
  echo "$state" >"$node_lock"
  mkdir -p "$node_dir"
  echo "node=$node_name" >"$state/real-node"
  exec {fd}>&-
}

realnode_unlock() {
  [ "$(cat "$node_lock" 2>/dev/null || true)" = "$state" ] && rm -f "$node_lock"
  return 0
}

realnode_build() {
  build_k8s_cmds "$node_bin" 1-8 kubelet kube-proxy
  realnode_images
}

# What the host looked like before the first `up`: the sysctls we change and the paths we may create.
realnode_record_host() {
  [ -f "$node_dir/host.before" ] && return 0
  local s p
  {
    for s in "${node_sysctls[@]}"; do echo "sysctl $s $(sysctl -n "$s")"; done
    for p in "${node_host_paths[@]}"; do [ -e "$p" ] || echo "absent $p"; done
    kube_chains | sed 's/^/chain /'
  } >"$node_dir/host.before.tmp"
  mv "$node_dir/host.before.tmp" "$node_dir/host.before"
}

# Configuration files and ports (once per bed; a resumed bed keeps them).
realnode_configure() {
  [ -f "$node_dir/kubelet.yaml" ] && return 0
  mkdir -p "$node_dir/containerd/certs.d/docker.io" "$node_dir/cni/net.d" "$node_dir/kubelet" "$node_dir/registry"
  printf 'kubelet=%s\nkubelet-healthz=%s\nproxy=%s\nproxy-metrics=%s\nregistry=%s\n' \
    "$(free_port)" "$(free_port)" "$(free_port)" "$(free_port)" "$(free_port)" >>"$state/ports"
  local t=$node_templates
  render_template "$t/containerd.toml" dir="$node_dir" sandbox_image="$node_sandbox_image" >"$node_dir/containerd.toml"
  render_template "$t/hosts.toml" port="$(port_of registry)" >"$node_dir/containerd/certs.d/docker.io/hosts.toml"
  render_template "$t/cni.conflist" dir="$node_dir" bridge="$node_bridge" subnet="$node_subnet" gateway="$node_ip" \
    >"$node_dir/cni/net.d/10-node.conflist"
  render_template "$t/registry.yml" dir="$node_dir" port="$(port_of registry)" >"$node_dir/registry.yml"
  render_template "$t/kube-proxy.yaml" kubeconfig="$state/admin.kubeconfig" node_name="$node_name" \
    subnet="$node_subnet" node_ip="$node_ip" healthz_port="$(port_of proxy)" metrics_port="$(port_of proxy-metrics)" \
    >"$node_dir/kube-proxy.yaml"
  render_template "$t/kubelet.yaml" dir="$node_dir" node_ip="$node_ip" port="$(port_of kubelet)" \
    healthz_port="$(port_of kubelet-healthz)" ca="$state/pki/ca.crt" >"$node_dir/kubelet.yaml"
}

# ---------------------------------------------------------------------------------------------- network

# The iptables rules we own, one per line: table, chain, match and target.
node_rules() {
  local api_port
  api_port=$(port_of apiserver)
  # In-cluster clients dial the kubernetes Service's ClusterIP; the API server listens on loopback only.
  echo "nat PREROUTING -i $node_bridge -d 10.96.0.1/32 -p tcp --dport 443 -j DNAT --to-destination 127.0.0.1:$api_port"
  # route_localnet on the bridge lets that DNAT reach 127.0.0.1; nothing else from a pod may.
  echo "filter INPUT -i $node_bridge -d 127.0.0.0/8 -m conntrack ! --ctstate DNAT -j DROP"
  # Pods talk to pods and to this node, never out of it.
  echo "filter FORWARD -s $node_subnet ! -d $node_subnet -j DROP"
}

node_rule() { # add|delete|check "table chain spec..."
  local op=$1 table chain spec
  read -r table chain spec <<<"$2"
  local flag=-A
  case $op in delete) flag=-D ;; check) flag=-C ;; esac
  # shellcheck disable=SC2086  # spec is a list of words
  iptables -w 5 -t "$table" "$flag" "$chain" $spec -m comment --comment "$node_tag"
}

realnode_network_up() {
  if ! ip link show "$node_bridge" >/dev/null 2>&1; then
    ip link add "$node_bridge" type bridge
    ip addr add "$node_ip/${node_subnet#*/}" dev "$node_bridge"
  fi
  ip link set "$node_bridge" up
  sysctl -qw "net.ipv4.conf.$node_bridge.route_localnet=1"
  local rule
  while read -r rule; do
    node_rule check "$rule" 2>/dev/null || node_rule add "$rule"
  done < <(node_rules)
}

realnode_network_down() {
  local rule link
  if [ -n "$(port_of apiserver)" ]; then
    while read -r rule; do
      while node_rule check "$rule" 2>/dev/null; do node_rule delete "$rule"; done
    done < <(node_rules)
  fi
  # Pods' veths go with their network namespaces; any left is still on our bridge.
  for link in $(ip -o link show master "$node_bridge" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$node_bridge" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------- components

start_containerd() {
  log "starting containerd $(containerd --version | awk '{print $3}') (socket $node_dir/containerd/containerd.sock)"
  start_bg containerd "$state/logs/containerd.log" containerd --config "$node_dir/containerd.toml"
}

start_registry() {
  log "starting a registry (docker-registry) on 127.0.0.1:$(port_of registry), docker.io's mirror"
  start_bg registry "$state/logs/registry.log" docker-registry serve "$node_dir/registry.yml"
}

start_kubelet() {
  log "starting kubelet $KUBERNETES_VERSION: node $node_name, API on $node_ip:$(port_of kubelet)"
  start_bg kubelet "$state/logs/kubelet.log" "$node_bin/kubelet" --config "$node_dir/kubelet.yaml" \
    --kubeconfig "$state/admin.kubeconfig" --root-dir "$node_dir/kubelet" --cert-dir "$node_dir/kubelet/pki" \
    --node-ip "$node_ip" --hostname-override "$node_name" --node-labels "$node_label=true" --v=1
}

start_kube_proxy() {
  log "starting kube-proxy $KUBERNETES_VERSION (iptables mode)"
  start_bg kube-proxy "$state/logs/kube-proxy.log" "$node_bin/kube-proxy" --config "$node_dir/kube-proxy.yaml" --v=1
}

realnode_wait_ready() { # component
  local kubectl=("$k8s_bin/kubectl" --kubeconfig "$state/admin.kubeconfig")
  case $1 in
  containerd) wait_for containerd 30 ctr_node version ;;
  registry) wait_for registry 30 curl -fsS "http://127.0.0.1:$(port_of registry)/v2/" ;;
  kubelet)
    wait_for kubelet 60 curl -fsS "http://127.0.0.1:$(port_of kubelet-healthz)/healthz"
    wait_for "node $node_name Ready" 60 "${kubectl[@]}" wait --for=condition=Ready "node/$node_name" --timeout=2s
    # A kubelet started again answers before it knows the pods it runs (exec: "pod does not exist").
    wait_for "kubelet to know its pods" 60 realnode_kubelet_synced
    ;;
  kube-proxy) wait_for kube-proxy 60 curl -fsS "http://127.0.0.1:$(port_of proxy)/healthz" ;;
  esac
}

realnode_kubelet_synced() { # the kubelet lists at least the pods the API server has bound to its node
  local kubectl=("$k8s_bin/kubectl" --kubeconfig "$state/admin.kubeconfig") want have
  want=$("${kubectl[@]}" get pods --all-namespaces --field-selector "spec.nodeName=$node_name" -o name | wc -l)
  have=$("${kubectl[@]}" get --raw "/api/v1/nodes/$node_name/proxy/pods" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"] or []))')
  [ "$have" -ge "$want" ]
}

# After the control plane: the network, then containerd (and the images the node needs without a
# registry), the registry, the kubelet, kube-proxy; then the kwok node is cordoned so pods land here.
realnode_up() {
  local c kubectl=("$k8s_bin/kubectl" --kubeconfig "$state/admin.kubeconfig") started=$SECONDS
  realnode_record_host
  realnode_configure
  realnode_network_up
  for c in "${node_components[@]}"; do
    running "$c" && continue
    start_component "$c"
    case $c in
    containerd) realnode_import_images ;;
    registry) realnode_push_images ;;
    esac
  done
  wait_for "cordoning kwok-node-0" 30 "${kubectl[@]}" cordon kwok-node-0
  log "real node $node_name ready in $((SECONDS - started))s; images: hack/local-cluster.sh load ARCHIVE [NAME]"
}

# ---------------------------------------------------------------------------------------------- down

# Every process whose command line names this path (shims name our containerd's socket), by pid.
pids_naming() { # path
  local p
  for p in /proc/[0-9]*; do
    grep -qaF "$1" "$p/cmdline" 2>/dev/null && echo "${p#/proc/}"
  done
  return 0
}

# Pods first (through the API, so the kubelet stops each sandbox: CNI DEL, network namespace gone), then
# the kubelet, what is left in containerd, containerd and its shims, kube-proxy's rules, ours, the bridge,
# mounts and cgroups, the host's sysctls as they were, and the lock.
realnode_down() {
  is_real_node || return 0
  local kubectl=("$k8s_bin/kubectl" --kubeconfig "$state/admin.kubeconfig")
  if running kube-apiserver && running kubelet; then
    "${kubectl[@]}" cordon "$node_name" >/dev/null 2>&1 || true
    "${kubectl[@]}" delete pods --all-namespaces --field-selector "spec.nodeName=$node_name" \
      --grace-period=1 --wait=false >/dev/null 2>&1 || true
    wait_until 60 realnode_no_pods || log "pods still on $node_name after 60s; removing them through containerd"
  fi
  stop_components 10 kube-proxy kubelet registry
  [ -f "$node_dir/kube-proxy.yaml" ] && "$node_bin/kube-proxy" --config "$node_dir/kube-proxy.yaml" --cleanup \
    >>"$state/logs/kube-proxy.log" 2>&1 || true
  running containerd && realnode_remove_containers
  stop_component containerd 10
  local pid
  for pid in $(pids_naming "$node_dir/"); do kill -KILL "$pid" 2>/dev/null || true; done
  realnode_unmount
  realnode_network_down
  realnode_remove_cgroups
  realnode_restore_host
  realnode_unlock
  log "real node $node_name removed"
}

realnode_no_pods() {
  [ -z "$("$k8s_bin/kubectl" --kubeconfig "$state/admin.kubeconfig" get pods --all-namespaces \
    --field-selector "spec.nodeName=$node_name" -o name 2>/dev/null)" ]
}

# Containers and sandboxes the kubelet did not remove: killed and deleted through containerd; a sandbox's
# network namespace (containerd's CRI made it, the kubelet did not stop it) unmounted and removed after.
realnode_remove_containers() {
  local id netns=()
  for id in $(ctr_node containers list -q 2>/dev/null); do
    mapfile -t -O "${#netns[@]}" netns < <(ctr_node containers info "$id" 2>/dev/null |
      python3 -c 'import json,sys; [print(n["path"]) for n in json.load(sys.stdin)["Spec"]["linux"]["namespaces"] if n["type"] == "network" and n.get("path")]' 2>/dev/null || true)
    ctr_node tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_node tasks list -q 2>/dev/null); do
    wait_until 10 realnode_task_stopped "$id" || true
    ctr_node tasks delete --force "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_node containers list -q 2>/dev/null); do ctr_node containers delete "$id" >/dev/null 2>&1 || true; done
  for id in ${netns[@]+"${netns[@]}"}; do
    umount "$id" 2>/dev/null || true
    rm -f "$id"
  done
}

realnode_task_stopped() { ! ctr_node tasks list 2>/dev/null | awk -v id="$1" '$1 == id && $3 == "RUNNING"' | grep -q .; }

# Mounts under the node's dir (overlay rootfs, sandbox shm, pod volumes), deepest first.
realnode_unmount() {
  local m
  awk -v d="$node_dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

# The kubelet's cgroups (kubepods and below, in every hierarchy), leaves first, after any process still in
# one (a container whose shim was killed) is.
realnode_remove_cgroups() {
  local d pid
  for pid in $(find /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for d in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
    [ -d "$d" ] || continue
    wait_until 10 find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || log "could not remove cgroup $d"
  done
}

realnode_restore_host() {
  [ -f "$node_dir/host.before" ] || return 0
  # The kubelet links each container's log here and unlinks it when it removes the container, which it
  # had no time to do for containers that ended shortly before `down`.
  find /var/log/containers -maxdepth 1 -type l -lname "$node_dir/*" -delete 2>/dev/null || true
  local kind what value
  while read -r kind what value; do
    case $kind in
    sysctl) sysctl -qw "$what=$value" 2>/dev/null || log "could not restore $what to $value" ;;
    # The kubelet's own dir holds only what a kubelet puts there (device-plugin sockets); of the others,
    # only the empty dirs go (another program may have started to use one since).
    absent) if [ "$what" = /var/lib/kubelet ]; then rm -rf "$what"; else find "$what" -depth -type d -empty -delete 2>/dev/null || true; fi ;;
    esac
  done <"$node_dir/host.before"
  realnode_remove_kube_chains
}

# KUBE-* chains as "family table chain" lines: kube-proxy's (`kube-proxy --cleanup` removes them) and the
# kubelet's (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT, in both families), which nothing removes.
kube_chains() {
  local family table
  for family in iptables ip6tables; do
    for table in filter nat mangle; do
      "$family" -w 5 -t "$table" -S 2>/dev/null | awk -v f="$family" -v t="$table" '$1 == "-N" && $2 ~ /^KUBE-/ {print f, t, $2}'
    done
  done
}

# The KUBE-* chains that were not there before the first `up`: every rule jumping to one, then the chain.
realnode_remove_kube_chains() {
  local family table chain rule
  while read -r family table chain; do
    grep -qxF "chain $family $table $chain" "$node_dir/host.before" && continue
    while read -r rule; do
      # xargs splits the rule as iptables -S quotes it (a comment is one word)
      echo "${rule/#-A/-D}" | xargs "$family" -w 5 -t "$table" || true
    done < <("$family" -w 5 -t "$table" -S | awk -v c="$chain" '$1 == "-A" && $2 != c && / -j / && $NF == c')
    "$family" -w 5 -t "$table" -F "$chain" 2>/dev/null || true
    "$family" -w 5 -t "$table" -X "$chain" 2>/dev/null || log "could not remove $family chain $chain ($table)"
  done < <(kube_chains)
}
