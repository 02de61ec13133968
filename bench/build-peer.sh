#!/usr/bin/env bash
# Build operator-sdk's Go `ansible-operator` (the peer the benchmarks compare against) from the Go module
# proxy, cached by version under ${XDG_CACHE_HOME:-~/.cache}/hybrid-operator/bin/. Prints its path last.
set -euo pipefail
version=${ANSIBLE_OPERATOR_VERSION:-v1.42.0}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-operator
out=$cache/bin/ansible-operator-$version
if [ ! -x "$out/ansible-operator" ]; then
  echo "[build-peer] building ansible-operator $version (first time only, several minutes)" >&2
  mkdir -p "$out.tmp"
  GOBIN="$out.tmp" GOFLAGS="-buildvcs=false -trimpath" GOTOOLCHAIN=auto \
    go install -ldflags "-s -w" "github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator@$version" >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out/ansible-operator"
