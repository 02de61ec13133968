#!/usr/bin/env bash
# Build operator-sdk's Go `ansible-operator` (the peer the benchmarks compare against) from the Go module
# proxy, cached by version under ${XDG_CACHE_HOME:-~/.cache}/hybrid-operator/bin/. Prints its path last.
set -euo pipefail
# shellcheck source=hack/lib/log.sh
. "$(dirname "${BASH_SOURCE[0]}")/../hack/lib/log.sh" build-peer
version=${ANSIBLE_OPERATOR_VERSION:-v1.42.0}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-operator
out=$cache/bin/ansible-operator-$version
module=github.com/operator-framework/ansible-operator-plugins
if [ ! -x "$out/ansible-operator" ]; then
  log "building ansible-operator $version (first time only, several minutes)"
  dir=$cache/build/ansible-operator-$version
  rm -rf "$dir" "$out.tmp" && mkdir -p "$dir" "$out.tmp"
  printf 'module hybrid-operator.local/peer-build\n\ngo 1.24\n\nrequire %s %s\n' "$module" "$version" >"$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/ansible-operator"\n' "$module" >"$dir/tools.go"
  # `go install pkg@version` needs the module's version list, which the proxy refuses for this module,
  # and the checksum database has no entry for it: a build module with the version pinned avoids both.
  export GOFLAGS="-buildvcs=false -trimpath" GOTOOLCHAIN=auto GONOSUMDB=$module
  (cd "$dir" && go mod tidy >&2 && go build -ldflags "-s -w" -o "$out.tmp/ansible-operator" "$module/cmd/ansible-operator" >&2)
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out/ansible-operator"
