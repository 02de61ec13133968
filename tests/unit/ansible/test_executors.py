"""Which roles the warm executor prepares ahead for the watches (``executors.prepared_dirs``): a role named by
its path, the ``roles/`` beside a playbook, finalizers' too, each once; never a collection's role (Ansible
finds it at run time) and never anything but the watches' own targets. And which playbooks its zygote loads
ahead (``executors.prepared_playbooks``): the watches' playbooks, finalizers' too, each once."""

from __future__ import annotations

from pathlib import Path

from hybrid_operator.ansible.executors import prepared_dirs, prepared_playbooks
from hybrid_operator.kube.objects import GVK
from hybrid_operator.settings.watches import Finalizer, Target, Watch

FOO = GVK("samplecontroller.k8s.io", "v1alpha1", "Foo")


def _watch(target: Target, finalizer: Target | None = None) -> Watch:
    cleanup = Finalizer("samplecontroller.k8s.io/cleanup", finalizer) if finalizer else None
    return Watch(gvk=FOO, target=target, finalizer=cleanup)


def test_roles_by_path_and_the_roles_beside_playbooks_each_once() -> None:
    watches = [
        _watch(Target(role="/opt/ansible/roles/foo"), finalizer=Target(playbook=Path("/opt/ansible/finalize.yml"))),
        _watch(Target(playbook=Path("/opt/ansible/site.yml"))),
        _watch(Target(role="/opt/ansible/roles/foo")),
        _watch(Target(role="example.operators.memcached")),  # a collection's role: Ansible finds it at run time
        _watch(Target(role="/opt/ansible/roles/bar"), finalizer=None),
    ]
    assert prepared_dirs(watches) == (
        Path("/opt/ansible/roles/foo"),
        Path("/opt/ansible/roles"),
        Path("/opt/ansible/roles/bar"),
    )


def test_no_watches_nothing_to_prepare() -> None:
    assert prepared_dirs([]) == ()


def test_the_watches_playbooks_each_once_finalizers_too() -> None:
    watches = [
        _watch(Target(role="/opt/ansible/roles/foo"), finalizer=Target(playbook=Path("/opt/ansible/finalize.yml"))),
        _watch(Target(playbook=Path("/opt/ansible/site.yml"))),
        _watch(Target(playbook=Path("/opt/ansible/site.yml")), finalizer=Target(role="/opt/ansible/roles/bar")),
    ]
    assert prepared_playbooks(watches) == (Path("/opt/ansible/finalize.yml"), Path("/opt/ansible/site.yml"))
    assert prepared_playbooks([]) == ()
