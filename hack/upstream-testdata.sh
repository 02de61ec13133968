#!/usr/bin/env bash
# operator-sdk's own Ansible test operators, from github.com/operator-framework/ansible-operator-plugins
# fetched unchanged through the Go module proxy (as bench/build-peer.sh fetches the peer) into the Go module
# cache. Nothing of them is copied into this repository; the upstream-compatibility tests run them.
#   hack/upstream-testdata.sh                 # testdata/memcached-molecule-operator, as published: prints
#                                             # its directory as the last line (test_upstream_compat.py)
#   hack/upstream-testdata.sh advanced DIR    # advanced-molecule-operator, which upstream generates with the
#                                             # operator-sdk CLI and never publishes: assembled into DIR
#                                             # (replaced) from the generator's source by
#                                             # hack/upstream_advanced.py; prints DIR (test_upstream_advanced.py)
# The advanced project needs ansible-galaxy and ansible-vault on PATH (the venv of hack/bootstrap.sh); the
# Python standing in for its image's /usr/local/bin/python3 is PYTHON, else python3 on PATH.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib/log.sh
. "$here/lib/log.sh" upstream-testdata
version=${ANSIBLE_OPERATOR_VERSION:-v1.42.0}
module=github.com/operator-framework/ansible-operator-plugins
# The checksum database has no entry for this module (see bench/build-peer.sh).
export GONOSUMDB=$module GOFLAGS=-mod=mod GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
info=$(cd "$scratch" && go mod download -json "$module@$version")
dir=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
case ${1:-memcached} in
  memcached)
    project=$dir/testdata/memcached-molecule-operator
    [ -f "$project/watches.yaml" ] || die "no $project/watches.yaml"
    echo "$project" ;;
  advanced)
    [ -n "${2:-}" ] || die "usage: hack/upstream-testdata.sh advanced DIR"
    python=${PYTHON:-$(command -v python3)}
    "$python" "$here/upstream_advanced.py" --source "$dir" --dest "$2" --python "$python" ;;
  *) die "usage: hack/upstream-testdata.sh [memcached | advanced DIR]" ;;
esac
