"""Layering, read with ast: which package may import which, and who may import the libraries we wrap.

The rules, lowest floor first (docs/internals/architecture.md shows the same picture):

    base      errors, logs, metrics, eventlog, httpbounds,   imports nothing of ours but base
              lifecycle
    kube/     the only package that talks to the API server  base
    settings/ flags, watches.yaml                            base, and kube.objects (a watch names a GVK)
    ansible/  the only package that runs Ansible             base, kube.objects (a leaf), settings
    serving/  the HTTP we serve                              base, kube
    proxy/    the runs' API proxy (an HTTP server)           base, kube
    project/  new / create api / generate crds               base, kube, settings, ansible
    reactor/  the only package that joins kube and ansible   base, kube, settings, ansible, serving, proxy
    cli                                                      anything but both kube and ansible

Inside ``ansible/``, only ``executors`` (the one public entry) imports ``warm/``, and the reactor
imports neither ``warm/`` nor ``compat/``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hybrid_operator"
EXCLUDED = PACKAGE / "collections"  # Ansible plugins: run inside ansible-playbook, not in the operator


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if EXCLUDED in path.parents:
            continue
        yield path.relative_to(PACKAGE.parent).as_posix(), path


def imported(path: Path, root: Path = PACKAGE.parent) -> set[str]:
    """Every module name an import statement anywhere in the file names (relative imports resolved).

    ``from a.b import c`` yields both ``a.b`` and ``a.b.c``: ``c`` may be a module or a name in it.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = list(path.relative_to(root).parts[:-1])  # the package the file is in
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


# Modules every layer may import: they import nothing of the operator and talk to nothing (kube/objects.py:
# the shapes of raw API objects and their accessors, which ansible/ reads a custom resource through too;
# kube/runclient.py: hooks on the kubernetes client a run's API modules use, which the warm executor's zygote
# installs: the client library stays inside kube/).
LEAVES = ("hybrid_operator.kube.objects", "hybrid_operator.kube.runclient")


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def importers(prefix: str) -> set[str]:
    """Modules of the package that import ``prefix`` or anything under it, a leaf module aside."""
    return {
        rel
        for rel, path in modules()
        if any(_under(name, prefix) and not any(_under(name, leaf) for leaf in LEAVES) for name in imported(path))
    }


def test_the_scanner_sees_imports() -> None:
    assert "hybrid_operator/kube/client.py" in importers("kubernetes")
    assert "hybrid_operator/ansible/running.py" in importers("ansible_runner")
    assert "hybrid_operator/reactor/reconciling.py" in importers("hybrid_operator.kube")
    assert "hybrid_operator/reactor/reconciling.py" in importers("hybrid_operator.ansible")


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    fake = tmp_path / "hybrid_operator" / "kube" / "x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from . import client\nfrom ..ansible import running\n", encoding="utf-8")
    assert {"hybrid_operator.kube.client", "hybrid_operator.ansible.running"} <= imported(fake, tmp_path)


def test_only_kube_imports_the_kubernetes_client() -> None:
    offenders = {m for m in importers("kubernetes") if not m.startswith("hybrid_operator/kube/")}
    assert offenders == set()


def test_only_ansible_imports_ansible_runner() -> None:
    offenders = {m for m in importers("ansible_runner") if not m.startswith("hybrid_operator/ansible/")}
    assert offenders == set()


def test_only_ansible_imports_ansible_core() -> None:
    offenders = {m for m in importers("ansible") if not m.startswith("hybrid_operator/ansible/")}
    assert offenders == set()


def test_a_leaf_imports_nothing_of_the_operator() -> None:
    for leaf in LEAVES:
        path = PACKAGE.parent / (leaf.replace(".", "/") + ".py")
        assert {name for name in imported(path) if _under(name, "hybrid_operator")} == set(), leaf


def test_a_leaf_does_not_hide_the_rest_of_its_package() -> None:
    assert "hybrid_operator/ansible/inputdir.py" not in importers("hybrid_operator.kube")  # objects only
    assert "hybrid_operator/reactor/queueing.py" not in importers("hybrid_operator.kube")  # objects only
    assert "hybrid_operator/reactor/reconciling.py" in importers("hybrid_operator.kube")  # client, objects


def test_kube_and_ansible_do_not_import_each_other_or_the_reactor() -> None:
    kube = {m for m in importers("hybrid_operator.ansible") if m.startswith("hybrid_operator/kube/")}
    ansible = {m for m in importers("hybrid_operator.kube") if m.startswith("hybrid_operator/ansible/")}
    reactor = {
        m
        for m in importers("hybrid_operator.reactor")
        if m.startswith(("hybrid_operator/kube/", "hybrid_operator/ansible/"))
    }
    assert (kube, ansible, reactor) == (set(), set(), set())


def _both() -> set[str]:
    return importers("hybrid_operator.kube") & importers("hybrid_operator.ansible")


def test_only_the_reactor_imports_both_kube_and_ansible() -> None:
    offenders = {m for m in _both() if not m.startswith("hybrid_operator/reactor/")}
    assert offenders - {"hybrid_operator/cli.py"} == set()  # cli.py: see the test below


def test_cli_leaves_kube_and_ansible_to_the_reactor() -> None:
    assert "hybrid_operator/cli.py" not in _both()


BASE = ("errors", "logs", "metrics", "eventlog", "httpbounds", "lifecycle")
MAY_IMPORT = {
    "base": set(BASE),
    "kube": set(BASE),
    "settings": {*BASE, "kube.objects"},
    "ansible": {*BASE, "kube.objects", "kube.runclient", "settings"},
    "serving": {*BASE, "kube"},
    "proxy": {*BASE, "kube"},
    "project": {*BASE, "kube", "settings", "ansible"},
    "reactor": {*BASE, "kube", "settings", "ansible", "serving", "proxy"},
}


def _room(rel: str) -> str:
    """The package a module belongs to for the rules: its folder under hybrid_operator, or base/cli."""
    parts = rel.removesuffix(".py").split("/")[1:]
    if len(parts) == 1:
        return "base" if parts[0] in BASE else parts[0]
    return parts[0]


def _allowed(name: str, rules: set[str]) -> bool:
    """Whether ``hybrid_operator.<name>`` is one of ``rules`` (a package, a base module, or a module)."""
    return any(name == rule or name.startswith(rule + ".") for rule in rules)


def test_every_package_imports_only_the_floors_below_it() -> None:
    offenders = []
    for rel, path in modules():
        room = _room(rel)
        if room not in MAY_IMPORT:
            continue  # cli, __main__: the top
        for name in imported(path):
            if not name.startswith("hybrid_operator."):
                continue
            target = name.removeprefix("hybrid_operator.")
            if _room("hybrid_operator/" + target.split(".")[0] + ".py") == room or target.split(".")[0] == room:
                continue  # inside its own package (or base importing base)
            if not _allowed(target, MAY_IMPORT[room]):
                offenders.append(f"{rel} imports {name}")
    assert offenders == []


def test_only_the_executor_choice_reaches_into_the_warm_executor() -> None:
    outside = {
        m for m in importers("hybrid_operator.ansible.warm") if not m.startswith("hybrid_operator/ansible/warm/")
    }
    assert outside == {"hybrid_operator/ansible/executors.py"}


def test_the_reactor_uses_ansible_through_its_public_modules() -> None:
    internals = importers("hybrid_operator.ansible.warm") | importers("hybrid_operator.ansible.compat")
    assert {m for m in internals if m.startswith("hybrid_operator/reactor/")} == set()


def test_the_rules_would_catch_an_upward_import(tmp_path: Path) -> None:
    fake = tmp_path / "hybrid_operator" / "kube" / "x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from hybrid_operator.reactor import queueing\n", encoding="utf-8")
    names = {n.removeprefix("hybrid_operator.") for n in imported(fake, tmp_path) if n.startswith("hybrid_operator.")}
    assert not all(_allowed(n, MAY_IMPORT["kube"]) for n in names)
