"""new and create api on disk: the layout, the names they refuse, and files that parse."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hybrid_operator.project import crds, scaffolding
from hybrid_operator.project.scaffolding import ScaffoldError, create_api, new_project
from hybrid_operator.settings.watches import load_watches

RESERVED = frozenset({"hostvars", "item", "omit", "name"})


def reserved() -> frozenset[str]:
    return RESERVED


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "memcached-operator"
    new_project(root, "example.com")
    return root


def add(root: Path, kind: str = "Memcached", group: str = "cache", version: str = "v1alpha1", **kw: bool) -> None:
    create_api(root, group=group, version=version, kind=kind, playbook=kw.get("playbook", False), reserved=reserved)


def test_new_makes_the_layout_of_this_repository(project: Path) -> None:
    for path in (
        "watches.yaml",
        "roles/.gitkeep",
        "playbooks/.gitkeep",
        "deploy/kustomization.yaml",
        "deploy/crds/kustomization.yaml",
        "deploy/watch/role.yaml",
        "deploy/tenant/namespace.yaml",
        "deploy/manager/manager.yaml",
        "deploy/samples/kustomization.yaml",
        "molecule/default/molecule.yml",
        "molecule/default/verify.yml",
        "requirements.yml",
        "Containerfile",
        "Makefile",
        "README.md",
        ".gitignore",
        ".yamllint",
        ".ansible-lint",
    ):
        assert (project / path).is_file(), path
    containerfile = (project / "Containerfile").read_text()
    assert "FROM ${BASE_IMAGE}" in containerfile
    # The base image's layout and entrypoint, as an operator-sdk project's Dockerfile uses upstream's.
    assert "COPY watches.yaml ${HOME}/watches.yaml" in containerfile
    assert "ENTRYPOINT" not in containerfile and "USER" not in containerfile
    (manager,) = yaml.safe_load_all((project / "deploy" / "manager" / "manager.yaml").read_text())
    (container,) = manager["spec"]["template"]["spec"]["containers"]
    assert all(arg.startswith("--") for arg in container["args"]), container["args"]
    assert "__" not in (project / "deploy" / "watch" / "role_binding.yaml").read_text()
    assert yaml.safe_load((project / "deploy" / "rbac" / "kustomization.yaml").read_text())["namespace"] == (
        "memcached-operator-system"
    )
    for target in ("run", "install", "uninstall", "deploy", "undeploy", "image", "test", "generate", "help"):
        assert f"\n{target}:" in (project / "Makefile").read_text()


def test_create_api_adds_a_kind_everywhere_it_belongs(project: Path) -> None:
    add(project)
    (watch,) = load_watches(project / "watches.yaml")
    assert (watch.gvk.group, watch.gvk.version, watch.gvk.kind) == ("cache.example.com", "v1alpha1", "Memcached")
    assert watch.target.role == str((project / "roles" / "memcached").resolve())
    role = project / "roles" / "memcached"
    for path in ("tasks/main.yml", "tasks/preflight.yml", "defaults/main.yml", "vars/main.yml", "README.md"):
        assert (role / path).is_file(), path
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    assert set(specs["argument_specs"]["main"]["options"]) == {
        "ansible_operator_meta",
        "_cache_example_com_memcached",
        "memcached_message",
    }
    rules = yaml.safe_load((project / "deploy" / "watch" / "role.yaml").read_text())["rules"]
    assert {r["resources"][0] for r in rules if r["apiGroups"] == ["cache.example.com"]} == {
        "memcacheds",
        "memcacheds/status",
        "memcacheds/finalizers",
    }
    sample = yaml.safe_load((project / "deploy" / "samples" / "cache_v1alpha1_memcached.yaml").read_text())
    assert sample["apiVersion"] == "cache.example.com/v1alpha1"
    assert yaml.safe_load((project / "deploy" / "samples" / "kustomization.yaml").read_text())["resources"] == [
        "cache_v1alpha1_memcached.yaml"
    ]
    assert (project / "molecule" / "default" / "tasks" / "memcached_test.yml").is_file()
    crd = yaml.safe_load((project / "deploy" / "crds" / "memcached.yaml").read_text())
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["message"] == {"type": "string", "description": "What the last run of the role said."}
    assert crds.generate(project / "watches.yaml", reserved=reserved) == []  # generated and up to date
    for path in project.rglob("*"):
        if path.suffix in (".yml", ".yaml") and path.is_file():
            assert "__" not in path.read_text().replace("___", "").replace("__ansible", ""), path
            yaml.safe_load(path.read_text())


def test_create_api_with_a_playbook(project: Path) -> None:
    add(project, kind="Backup", playbook=True)
    (watch,) = load_watches(project / "watches.yaml")
    assert watch.target.playbook == (project / "playbooks" / "backup.yml").resolve()
    assert (project / "deploy" / "crds" / "backup.yaml").is_file()


def test_two_kinds_and_the_same_one_twice(project: Path) -> None:
    add(project)
    add(project, kind="Cluster", version="v1")
    assert len(load_watches(project / "watches.yaml")) == 2
    with pytest.raises(ScaffoldError, match="exists already"):
        add(project)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kind", "memcached"),
        ("kind", "Mem cached"),
        ("kind", "../Etc"),
        ("kind", "M"),
        ("kind", "Ä" + "x" * 5),
        ("group", "Cache"),
        ("group", "a.b"),
        ("group", "../etc"),
        ("group", "-x"),
        ("version", "1"),
        ("version", "v1alpha"),
        ("version", "v0"),
        ("version", "v1\nkind: Secret"),
        ("version", "v1\n"),
        ("kind", "Memcached\n"),
    ],
)
def test_hostile_or_wrong_names_are_refused_before_anything_is_written(project: Path, field: str, value: str) -> None:
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    names = {"kind": "Memcached", "group": "cache", "version": "v1alpha1", field: value}
    with pytest.raises(ScaffoldError, match=f"--{field}"):
        add(project, **names)  # type: ignore[arg-type]
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before


def test_new_refuses_a_bad_directory_or_domain(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match="DNS label"):
        new_project(tmp_path / "My_Operator", "example.com")
    with pytest.raises(ScaffoldError, match="--domain"):
        new_project(tmp_path / "op", "example")
    with pytest.raises(ScaffoldError, match="--domain"):
        new_project(tmp_path / "op", "exa mple.com")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(ScaffoldError, match="not an empty directory"):
        new_project(tmp_path / "full", "example.com")


def test_create_api_outside_a_project(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match="no PROJECT file"):
        add(tmp_path)


def test_a_placeholder_without_a_value_is_a_bug_never_a_half_filled_file() -> None:
    with pytest.raises(ScaffoldError, match="__NOPE__"):
        scaffolding._fill("a __NOPE__ b", {"ROLE": "x"})
