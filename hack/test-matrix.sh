#!/usr/bin/env bash
# The supported ansible-core range, tested: what hack/test.sh runs after the main suite.
#
#   hack/test-matrix.sh legs     every supported minor but the default venv's (hack/constraints/; with .venv
#                                on 2.21: 2.18, the one operator-sdk's image pins, 2.19 and 2.20)
#   hack/test-matrix.sh 2.19     one minor
#   hack/test-matrix.sh canary   the newest ansible-core release on PyPI, whatever our range says
#
# A leg is a venv for one minor (hack/bootstrap.sh X.Y: made from its constraints file, cached until that
# file or pyproject.toml changes) running the unit tests that touch Ansible, the warm executor's
# equivalence tests, the untrusted-data tests of both executors, one Foo end-to-end test and one kind of
# operator-sdk's advanced-molecule-operator (what ansible-core 2.19 changed for real projects); a failing
# leg fails CI. The canary installs the newest ansible-core (and the newest `ansible`) and runs the warm executor's unit and equivalence tests with the version gate open
# (HYBRID_OPERATOR_WARM_UNTESTED_ANSIBLE=1): when a release moves something the warm path borrows, it
# says so in a banner, but never fails CI (a new upstream release is news, not a regression of ours).
# Nothing to do for the canary when the default venv already has the newest release.
#
# Needs $KUBECONFIG (the Foo test; hack/test.sh has the test bed up by then). Prints each leg's time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
default_bin=$(hack/bootstrap.sh | tail -n 1)
# Only what touches Ansible: the rest of the unit suite runs no Ansible and gains nothing from another minor.
LEG_TESTS=(
  tests/unit/ansible
  tests/unit/collections
  tests/unit/project
  tests/unit/reactor/test_admitting.py
  tests/integration/test_warm_executor.py
  tests/integration/test_warm_spares.py
  tests/integration/test_untrusted_extravars.py
  tests/integration/test_foo.py::test_foo_creates_an_owned_deployment_and_reports_availability
  # operator-sdk's advanced-molecule-operator: its counter written into ConfigMap data converges on a leg
  # before 2.19 and fails exactly as 2.19+ native types make it fail on the others (about 13 s a leg).
  tests/integration/test_upstream_advanced.py::test_reconciliationtest
)
CANARY_TESTS=(tests/unit/ansible tests/integration/test_warm_executor.py tests/integration/test_warm_spares.py)

version_of() { "$1/python" -P -c 'import ansible.release as r, sys; print(r.__version__, sys.version.split()[0])'; }

leg() {
  local minor=$1 started=$SECONDS leg_bin version python
  leg_bin=$(hack/bootstrap.sh "$minor" | tail -n 1)
  read -r version python < <(version_of "$leg_bin")
  printf '\n--> ansible-core %s on Python %s\n' "$version" "$python"
  if ! "$leg_bin/pytest" -p no:cacheprovider -q -n 2 --dist loadgroup "${LEG_TESTS[@]}"; then
    printf -- '--> ansible-core %s on Python %s: FAILED after %d s\n' "$version" "$python" $((SECONDS - started))
    return 1
  fi
  printf -- '--> ansible-core %s on Python %s: passed in %d s\n' "$version" "$python" $((SECONDS - started))
}

banner() {
  local line='!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
  printf '\n%s\n' "$line"
  printf '!!! %s\n' "$@"
  printf '%s\n\n' "$line"
}

canary() {
  local started=$SECONDS default newest canary_bin python
  read -r default _ < <(version_of "$default_bin")
  newest=$("$default_bin/python" -P -m pip index versions ansible-core 2>/dev/null | sed -n 's/^ansible-core (\(.*\))$/\1/p')
  if [ -z "$newest" ]; then
    banner "CANARY: could not ask PyPI for the newest ansible-core; not run"
    return 0
  fi
  if [ "$newest" = "$default" ]; then
    printf -- '--> canary: the default venv already runs the newest ansible-core (%s); nothing new\n' "$newest"
    return 0
  fi
  if ! canary_bin=$(hack/bootstrap.sh canary | tail -n 1); then
    banner "CANARY: ansible-core $newest is out, and could not be installed with the rest of our pins"
    return 0
  fi
  read -r newest python < <(version_of "$canary_bin")
  printf '\n--> canary: ansible-core %s on Python %s (tested up to %s)\n' "$newest" "$python" "$default"
  if HYBRID_OPERATOR_WARM_UNTESTED_ANSIBLE=1 "$canary_bin/pytest" -p no:cacheprovider -q "${CANARY_TESTS[@]}"; then
    banner "CANARY: ansible-core $newest passes the warm executor's tests." \
      "Add hack/constraints/ansible-core-X.Y.txt for it, widen pyproject and compat.SUPPORTED, and say so in docs/operating/versions.md."
  else
    banner "CANARY: ansible-core $newest MOVED something the warm executor borrows (see the failures above)." \
      "The operator still works on it (the warm executor switches itself off and uses ansible-runner);" \
      "fix hybrid_operator/ansible/compat/ for $newest before widening the supported range. CI is not failed for this."
  fi
  printf -- '--> canary: %d s\n' $((SECONDS - started))
}

case ${1:-legs} in
  legs)
    read -r default_version _ < <(version_of "$default_bin")
    failed=()
    for file in hack/constraints/ansible-core-*.txt; do
      minor=${file##*/ansible-core-}
      minor=${minor%.txt}
      if [ "$minor" != "${default_version%.*}" ]; then
        leg "$minor" || failed+=("$minor")  # the other legs still run: all the news at once
      fi
    done
    if [ ${#failed[@]} -gt 0 ]; then
      echo "ansible-core legs that failed: ${failed[*]}" >&2
      exit 1
    fi
    ;;
  canary) canary ;;
  [0-9]*.[0-9]*) leg "$1" ;;
  *) echo "usage: hack/test-matrix.sh [legs | X.Y | canary]" >&2; exit 2 ;;
esac
