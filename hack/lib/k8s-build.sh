# shellcheck shell=bash disable=SC2154  # cache, k8s_bin, k8s_cmds, etcd_bin, kwok_bin: set by hack/local-cluster.sh, which sources this
# Building the test bed's binaries from the Go module proxy, cached under $cache/bin/ keyed by version:
# etcd, kwok, the control plane and kubectl (every bed), kubelet and kube-proxy (a bed with a real node,
# hack/lib/realnode.sh). Sourced by hack/local-cluster.sh, which sets cache, k8s_bin, etcd_bin, kwok_bin,
# k8s_cmds and the versions (hack/versions.env); source hack/lib/log.sh and hack/lib/proc.sh first.

# A throwaway Go module that requires k8s.io/kubernetes and points every staging module
# (k8s.io/api, k8s.io/client-go, ...) at its published v0.x.y twin: the known way to build
# Kubernetes commands from the module proxy instead of a git checkout.
write_k8s_build_module() { # dir command...
  local dir=$1 gomod staging c
  shift
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  staging="v0.${KUBERNETES_VERSION#v1.}"
  {
    echo "module hybrid-operator.local/kubernetes-build"
    echo
    echo "go $(sed -n 's/^go //p' "$gomod")"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
    echo ")"
  } >"$dir/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    for c in "$@"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
    echo ")"
  } >"$dir/tools.go"
}

k8s_ldflags() {
  local pkg minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  local flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

# Kubernetes commands into out-dir (once: nothing is done when every one is there), built in a build module
# of their own under $cache/build; every build shares Go's module and build caches, so a second set of
# commands (kubelet, kube-proxy after the control plane) compiles only what is new to it.
build_k8s_cmds() { # out-dir minutes-first-time command...
  local out=$1 minutes=$2 c missing=0
  shift 2
  for c in "$@"; do [ -x "$out/$c" ] || missing=1; done
  [ "$missing" -eq 0 ] && return 0
  log "building Kubernetes $KUBERNETES_VERSION ($*); first time only, $minutes min on 2 cores"
  local dir=$cache/build/${out##*/}
  rm -rf "$dir" "$out.tmp" && mkdir -p "$dir" "$out.tmp"
  write_k8s_build_module "$dir" "$@"
  (cd "$dir" && run_logged "resolving modules" "$dir/tidy.log" go mod tidy)
  local pkgs=()
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$dir" && run_logged "compiling $*" "$dir/build.log" \
    go build -ldflags "$(k8s_ldflags)" -o "$out.tmp/" "${pkgs[@]}")
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_kubernetes() { build_k8s_cmds "$k8s_bin" 15-30 "${k8s_cmds[@]}"; }

# etcd and kwok carry replace directives of their own, so `go install pkg@version` refuses them;
# a one-line build module that requires them at the pinned version builds them the same way.
build_simple() {
  local what=$1 module=$2 version=$3 pkg=$4 out=$5
  [ -x "$out/$what" ] && return 0
  log "building $what $version; first time only, a few minutes"
  local dir=$cache/build/$what-$version
  rm -rf "$dir" "$out.tmp" && mkdir -p "$dir" "$out.tmp"
  printf 'module hybrid-operator.local/%s-build\n\ngo 1.24\n\nrequire %s %s\n' "$what" "$module" "$version" >"$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$dir/tools.go"
  (cd "$dir" && run_logged "resolving $what modules" "$dir/tidy.log" go mod tidy)
  (cd "$dir" && run_logged "compiling $what" "$dir/build.log" go build -ldflags "-s -w" -o "$out.tmp/$what" "$pkg")
  mv "$out.tmp" "$out"
}

# kwok's own "fast" stages (node ready + lease heartbeat, pods ready at once), rendered from the
# kwok module's kustomize tree with our kubectl and cached beside the kwok binary.
kwok_stages() {
  local out=$kwok_bin/stages.yaml dir
  [ -s "$out" ] && return 0
  dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  "$k8s_bin/kubectl" kustomize "$dir/kustomize/stage/fast" >"$out.tmp"
  mv "$out.tmp" "$out"
}

build_all() {
  command -v go >/dev/null || die "Go is required to build the test bed (https://go.dev/doc/install)"
  mkdir -p "$cache/bin" "$cache/build"
  build_simple etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "$etcd_bin"
  build_simple kwok sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok "$kwok_bin"
  build_kubernetes
  kwok_stages
}
