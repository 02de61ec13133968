#!/usr/bin/env bash
# Print the directory of operator-sdk's own Ansible test operator, testdata/memcached-molecule-operator of
# github.com/operator-framework/ansible-operator-plugins, fetched unchanged through the Go module proxy
# (as bench/build-peer.sh fetches the peer) into the Go module cache. Nothing of it is copied into this
# repository; the upstream-compatibility test (tests/integration/test_upstream_compat.py) runs it from there.
#   hack/upstream-testdata.sh          # prints the project directory as its last line
set -euo pipefail
# shellcheck source=hack/lib/log.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh" upstream-testdata
version=${ANSIBLE_OPERATOR_VERSION:-v1.42.0}
module=github.com/operator-framework/ansible-operator-plugins
# The checksum database has no entry for this module (see bench/build-peer.sh).
export GONOSUMDB=$module GOFLAGS=-mod=mod GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
info=$(cd "$scratch" && go mod download -json "$module@$version")
dir=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
project=$dir/testdata/memcached-molecule-operator
[ -f "$project/watches.yaml" ] || die "no $project/watches.yaml"
echo "$project"
