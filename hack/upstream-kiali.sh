#!/usr/bin/env bash
# Kiali's operator (github.com/kiali/kiali-operator), an operator-sdk Ansible operator, assembled from a
# checkout you give as its image and Helm chart would run it; nothing of it is kept in this repository.
# tests/integration/test_upstream_kiali.py runs it; so can you, by hand (see docs/operator-sdk/real-projects.md).
#   KIALI_OPERATOR_DIR=~/src/kiali-operator hack/upstream-kiali.sh DIR   # assembled into DIR (replaced);
#                                                                     # prints DIR as the last line
# Without KIALI_OPERATOR_DIR it says so and prints nothing (exit 0): there is nothing to run.
# DIR stands for the image's HOME (/opt/ansible): what build/Dockerfile copies there (watches-k8s.yaml,
# playbooks/, roles/), the image's /etc/ansible/ansible.cfg (roles_path under HOME) as DIR/ansible.cfg,
# the CRD (crd-docs/crd/kiali.io_kialis.yaml) under DIR/crds/, and DIR/hybrid-operator-run.json: the
# operator's flags and environment as the kiali-operator Helm chart's Deployment sets them with its default
# values (kiali/helm-charts, kiali-operator/templates/deployment.yaml), minus the pod-only ones (probe and
# metrics addresses, POD_NAMESPACE from the downward API). Its role reads its own version from the label
# `version` of the operator's pod (POD_NAME, POD_NAMESPACE): "pod" in the JSON says which pod to make to
# stand for it (labelled with the checkout's Makefile VERSION) when the operator runs outside a cluster.
# The collections of its
# requirements.yml (git sources on GitHub) are not installed: the `ansible` package's kubernetes.core,
# community.general and ansible.posix stand in for them, and operator_sdk.util is ours.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib/log.sh
. "$here/lib/log.sh" upstream-kiali
dest=${1:?usage: KIALI_OPERATOR_DIR=CHECKOUT hack/upstream-kiali.sh DIR}
src=${KIALI_OPERATOR_DIR:-}
if [ -z "$src" ]; then
  log "skipped: set KIALI_OPERATOR_DIR to a checkout of github.com/kiali/kiali-operator"
  exit 0
fi
for need in watches-k8s.yaml playbooks/kiali-deploy.yml roles/default/kiali-deploy crd-docs/crd/kiali.io_kialis.yaml; do
  [ -e "$src/$need" ] || die "$src has no $need: not a kiali-operator checkout"
done
rm -rf "$dest"
mkdir -p "$dest/crds"
dest=$(cd "$dest" && pwd)
cp -r "$src/watches-k8s.yaml" "$src/playbooks" "$src/roles" "$dest/"
cp "$src/crd-docs/crd/kiali.io_kialis.yaml" "$dest/crds/"
printf '[defaults]\nroles_path = %s/roles\n' "$dest" >"$dest/ansible.cfg"
version=$(sed -n 's/^VERSION ?= *//p' "$src/Makefile")
cat >"$dest/hybrid-operator-run.json" <<JSON
{
  "watches": "$dest/watches-k8s.yaml",
  "pod": {"name": "kiali-operator", "labels": {"app.kubernetes.io/name": "kiali-operator", "version": "${version:-unknown}"}},
  "args": ["--zap-log-level=info", "--leader-election-id=kiali-operator", "--reconcile-period=0s"],
  "env": {
    "WATCH_NAMESPACE": "",
    "POD_NAME": "kiali-operator",
    "ALLOW_AD_HOC_KIALI_NAMESPACE": "true",
    "ALLOW_AD_HOC_KIALI_IMAGE": "false",
    "ALLOW_AD_HOC_CONTAINERS": "false",
    "ALLOW_SECURITY_CONTEXT_OVERRIDE": "false",
    "ALLOW_ALL_ACCESSIBLE_NAMESPACES": "true",
    "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "100",
    "ANSIBLE_DEBUG_LOGS": "true",
    "ANSIBLE_VERBOSITY_KIALI_KIALI_IO": "1",
    "ANSIBLE_CONFIG": "$dest/ansible.cfg",
    "ANSIBLE_LOCAL_TEMP": "$dest/tmp/ansible/tmp",
    "ANSIBLE_REMOTE_TEMP": "$dest/tmp/ansible/tmp"
  }
}
JSON
log "kiali-operator $(git -C "$src" describe --always --tags 2>/dev/null || echo '(not a git checkout)') assembled"
echo "$dest"
