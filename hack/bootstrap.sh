#!/usr/bin/env bash
# Create (or refresh) a virtualenv with the operator, ansible-core, ansible-runner, the `ansible` package's
# collections (kubernetes.core, openstack.cloud) and the test tools, pinned by hack/constraints/.
#
#   hack/bootstrap.sh            # .venv: the newest supported ansible-core on the newest Python it takes
#   hack/bootstrap.sh 2.19       # a venv for one supported ansible-core minor (CI's matrix), cached
#   hack/bootstrap.sh canary     # the newest ansible-core and `ansible` releases on PyPI, whatever our range
#
# The last line printed is the venv's bin directory. Each hack/constraints/ansible-core-X.Y.txt pins one
# supported minor and says which Pythons it takes, best first ("# python: 3.13 3.12"); the default venv
# gets the newest minor for which one of those Pythons is installed (python3.X on PATH or under pyenv), so a
# machine with Python 3.13 gets ansible-core 2.21 and one with only 3.11 gets 2.19. For Python 3.13 the
# interpreter is the one the operator's image runs, built once by hack/build-python.sh (Debian's source,
# profile-guided and link-time optimized; cached): a fresh machine spends 15-25 minutes on it the first
# time. HYBRID_OPERATOR_PYTHON_BUILD=0 skips that build (python3.13 on PATH or under pyenv is used, as
# when the build is not possible here: said in the log). PYTHON=/path/to/python chooses the interpreter
# instead (and with it the newest minor that takes it). A venv is reinstalled only when pyproject.toml,
# its constraints file or its Python changes; the matrix venvs live under
# ${XDG_CACHE_HOME:-~/.cache}/hybrid-operator/venvs/, shared by checkouts with the same pins.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
constraints_dir=$root/hack/constraints
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-operator
# shellcheck source=hack/lib/log.sh
. "$root/hack/lib/log.sh" bootstrap

# The X.Y of an interpreter that runs (a pyenv shim for a version not selected exits non-zero).
python_minor() { "$1" -P -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

# The interpreter hack/build-python.sh builds for Python X.Y (the image's), built first when it is not
# yet; nothing (status 1) for another X.Y, with HYBRID_OPERATOR_PYTHON_BUILD=0, or when the build fails.
built_python() {
  local want=$1 built
  [ "$want" = "$(. "$root/hack/versions.env" && echo "${PYTHON_SOURCE_VERSION%.*}")" ] || return 1
  if built=$("$root/hack/build-python.sh" --path); then
    echo "$built"
    return 0
  fi
  [ "${HYBRID_OPERATOR_PYTHON_BUILD:-1}" != 0 ] || return 1
  if built=$("$root/hack/build-python.sh" | tail -n 1) && [ -x "$built" ]; then
    echo "$built"
    return 0
  fi
  log "could not build Python $want as the image has it (above): using the one installed here"
  return 1
}

# A working interpreter for Python X.Y: the image's (built_python), else python3.Y on PATH, else the newest
# pyenv build of X.Y.
find_python() {
  local want=$1 candidate pyenv_root
  if candidate=$(built_python "$want") && [ "$(python_minor "$candidate")" = "$want" ]; then
    echo "$candidate"
    return 0
  fi
  if candidate=$(command -v "python$want") && [ "$(python_minor "$candidate")" = "$want" ]; then
    echo "$candidate"
    return 0
  fi
  pyenv_root=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
  while read -r candidate; do
    candidate=$candidate/bin/python$want
    if [ -x "$candidate" ] && [ "$(python_minor "$candidate")" = "$want" ]; then
      echo "$candidate"
      return 0
    fi
  done < <(find "$pyenv_root/versions" -maxdepth 1 -regex ".*/${want//./\\.}\.[0-9]+" 2>/dev/null | sort -rV)
  return 1
}

pythons_of() { sed -n 's/^# python: *//p' "$1"; }  # the Pythons a constraints file takes, best first
minors() { find "$constraints_dir" -name 'ansible-core-*.txt' | sed 's/.*ansible-core-\(.*\)\.txt/\1/' | sort -rV; }

# Choose the constraints file (ansible-core minor) and the interpreter.
target=${1:-default}
case $target in
  default | canary) wanted=$(minors) ;;
  [0-9]*.[0-9]*)
    [ -f "$constraints_dir/ansible-core-$target.txt" ] || die "ansible-core $target is not supported (no hack/constraints/ansible-core-$target.txt)"
    wanted=$target ;;
  *) die "usage: hack/bootstrap.sh [default | X.Y | canary]" ;;
esac
minor="" python=""
for candidate_minor in $wanted; do
  for version in $(pythons_of "$constraints_dir/ansible-core-$candidate_minor.txt"); do
    if [ -n "${PYTHON:-}" ]; then
      [ "$(python_minor "$PYTHON")" = "$version" ] && python=$PYTHON
    else
      python=$(find_python "$version") || python=""
    fi
    if [ -n "$python" ]; then minor=$candidate_minor; break 2; fi
  done
done
[ -n "$minor" ] || die "no Python for ansible-core ${wanted//$'\n'/ or } (PYTHON=${PYTHON:-unset}; see hack/constraints/)"
constraints=$constraints_dir/ansible-core-$minor.txt

python_version=$("$python" -P -c 'import sys; print(sys.version.split()[0])')
# The matrix venvs are shared by every checkout with the same pyproject.toml and constraints (a fresh
# clone, as CI makes, finds them made); each bootstrap points the venv's editable install at its own
# checkout (seconds), so what a leg tests is this checkout's code.
content=$({ cat "$root/pyproject.toml" "$constraints"; echo "$python_version"; } | sha256sum | cut -c1-8)
case $target in
  default) venv=${HYBRID_OPERATOR_VENV:-$root/.venv} ;;
  *) venv=${HYBRID_OPERATOR_VENV:-$cache/venvs/$content/ansible-core-$target} ;;
esac
# The interpreter a venv (or an interpreter) runs on, as a real path.
base_python() { "$1" -P -c 'import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))' 2>/dev/null; }
if [ -x "$venv/bin/python" ] && [ "$(base_python "$venv/bin/python")" != "$(base_python "$python")" ]; then
  [ -f "$venv/pyvenv.cfg" ] || die "$venv is not a virtualenv; remove it or set HYBRID_OPERATOR_VENV"
  log "$venv has another Python: making it again with $python ($python_version)"
  rm -rf "$venv"
fi

key=$({ cat "$root/pyproject.toml" "$constraints"; echo "$python_version $target"; } | sha256sum | cut -c1-16)
stamp="$venv/.installed-$key"
if [ "$target" = canary ] || [ ! -f "$stamp" ]; then
  log "installing into $venv: Python $python_version, ansible-core $minor constraints (first time: a few minutes)"
  # -P: never put the working directory first on sys.path: the repo's operator.py would shadow the
  # standard library's `operator` module.
  [ -x "$venv/bin/python" ] || "$python" -P -m venv "$venv"
  "$venv/bin/python" -P -m pip install -q --upgrade pip >&2
  if [ "$target" = canary ]; then
    # Everything else as pinned; then the newest `ansible` and, even if no `ansible` is built on it yet,
    # the newest ansible-core (pip warns that it is outside our range: that is the point of a canary).
    grep -v -E '^(ansible-core|ansible)==' "$constraints" >"$venv/constraints.txt"
    "$venv/bin/python" -P -m pip install -q -e "${root}[test]" -c "$venv/constraints.txt" >&2
    "$venv/bin/python" -P -m pip install -q --upgrade ansible >&2
    "$venv/bin/python" -P -m pip install -q --upgrade ansible-core 2>&1 | grep -v -i 'incompatible\|requires ansible-core' >&2 || true
  else
    "$venv/bin/python" -P -m pip install -q -e "${root}[test]" -c "$constraints" >&2
  fi
  rm -f "$venv"/.installed-*
  touch "$stamp"
  log "installed: $("$venv/bin/python" -P -c 'import ansible.release as r, sys; print("Python", sys.version.split()[0], "ansible-core", r.__version__)')"
elif [ "$target" != default ] && [ -z "${HYBRID_OPERATOR_VENV:-}" ]; then
  "$venv/bin/python" -P -m pip install -q --no-deps -e "$root" >&2  # a shared venv: this checkout's code
fi
echo "$venv/bin"
