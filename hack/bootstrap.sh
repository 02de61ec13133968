#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv in .venv from pyproject.toml: the operator, ansible-core,
# ansible-runner, the `ansible` package's collections (kubernetes.core, openstack.cloud), and the test
# tools. Skips the install when pyproject.toml has not changed since the last one.
#   hack/bootstrap.sh            # prints the venv's bin directory as its last line
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${HYBRID_OPERATOR_VENV:-$root/.venv}
python=${PYTHON:-python3}
log() { printf '[bootstrap] %s\n' "$*" >&2; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  { log "error: Python 3.11 or newer is required (found $("$python" --version 2>&1))"; exit 1; }
stamp="$venv/.installed-$(sha256sum "$root/pyproject.toml" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  log "installing the project and its dependencies into $venv (first time: a few minutes)"
  # -P: never put the working directory first on sys.path: the repo's operator.py would shadow the
  # standard library's `operator` module.
  [ -x "$venv/bin/python" ] || "$python" -P -m venv "$venv"
  "$venv/bin/python" -P -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -P -m pip install -q -e "$root[test]" >&2
  rm -f "$venv"/.installed-*
  touch "$stamp"
  log "installed"
fi
echo "$venv/bin"
