"""generate crds on disk: our own CRDs are up to date, hand edits survive, new kinds get a CRD file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from hybrid_operator.errors import ConfigError
from hybrid_operator.project import crds
from hybrid_operator.project.argspecs import ArgumentSpecError

ROOT = Path(__file__).resolve().parents[3]
RESERVED = frozenset({"hostvars", "item", "omit"})


def reserved() -> frozenset[str]:
    return RESERVED


def generate(project: Path) -> list[crds.Change]:
    return crds.generate(project / "watches.yaml", reserved=reserved)


def project(tmp_path: Path, options: str, *, playbook: bool = False) -> Path:
    meta = tmp_path / "roles" / "memcached" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(
        f"---\nargument_specs:\n  main:\n    short_description: Memcached as a role\n    options:\n{options}"
    )
    (tmp_path / "roles" / "memcached" / "tasks").mkdir()
    (tmp_path / "roles" / "memcached" / "tasks" / "main.yml").write_text("---\n[]\n")
    target = "role: memcached"
    if playbook:
        (tmp_path / "playbooks").mkdir()
        (tmp_path / "playbooks" / "memcached.yml").write_text(
            "---\n- hosts: localhost\n  tasks:\n    - ansible.builtin.import_role:\n        name: memcached\n"
        )
        target = "playbook: playbooks/memcached.yml"
    (tmp_path / "watches.yaml").write_text(
        f"---\n- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  {target}\n"
    )
    crd_dir = tmp_path / "deploy" / "crds"
    crd_dir.mkdir(parents=True)
    (crd_dir / "kustomization.yaml").write_text("---\nresources: []\n")
    return tmp_path


SIZE = "      size:\n        type: int\n        required: true\n        description: [spec.size. How many.]\n"


def test_our_own_crds_are_generated_and_up_to_date() -> None:
    assert crds.generate(ROOT / "watches.yaml", reserved=reserved) == []


@pytest.mark.parametrize("playbook", [False, True])
def test_a_new_kind_gets_a_crd_listed_in_the_kustomization(tmp_path: Path, playbook: bool) -> None:
    root = project(tmp_path, SIZE, playbook=playbook)
    changes = generate(root)
    assert [c.path.name for c in changes] == ["memcached.yaml", "kustomization.yaml"]
    crds.write(changes)
    crd = yaml.safe_load((root / "deploy" / "crds" / "memcached.yaml").read_text())
    assert crd["metadata"]["name"] == "memcacheds.cache.example.com"
    (version,) = crd["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Synced", "Reason", "Age"]
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["required"] == ["spec"]
    assert schema["properties"]["spec"]["properties"]["size"] == {"type": "integer", "description": "How many."}
    assert yaml.safe_load((root / "deploy" / "crds" / "kustomization.yaml").read_text()) == {
        "resources": ["memcached.yaml"]
    }
    assert generate(root) == []  # regenerating changes nothing


def test_hand_edits_survive_and_removed_options_go(tmp_path: Path) -> None:
    root = project(tmp_path, SIZE + "      mode:\n        choices: [a, b]\n")
    crds.write(generate(root))
    path = root / "deploy" / "crds" / "memcached.yaml"
    text = path.read_text()
    text = text.replace("names:\n", "names:\n    shortNames:\n      - mc\n")
    text = text.replace(
        "                size:\n                  type: integer\n",
        "                size:\n                  # at most ten\n                  type: integer\n"
        "                  maximum: 10\n                  x-kubernetes-validations:\n"
        "                    - rule: self % 2 == 0\n                      message: even\n",
    )
    path.write_text(text)
    specs = root / "roles" / "memcached" / "meta" / "argument_specs.yml"
    specs.write_text(specs.read_text().replace("      mode:\n        choices: [a, b]\n", ""))
    (change,) = generate(root)
    assert "-                mode:" in change.diff()
    crds.write([change])
    after = path.read_text()
    assert "# at most ten" in after and "shortNames:\n      - mc" in after
    size = yaml.safe_load(after)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert size["properties"]["size"]["maximum"] == 10
    assert size["properties"]["size"]["x-kubernetes-validations"][0]["rule"] == "self % 2 == 0"
    assert list(size["properties"]) == ["size"]


def test_a_crd_edited_out_of_date_is_reported_with_a_diff(tmp_path: Path) -> None:
    root = project(tmp_path, SIZE)
    crds.write(generate(root))
    path = root / "deploy" / "crds" / "memcached.yaml"
    path.write_text(path.read_text().replace("type: integer", "type: string"))
    (change,) = generate(root)
    assert "-                  type: string\n+                  type: integer" in change.diff()


def test_int_or_string_by_hand_replaces_the_generated_type(tmp_path: Path) -> None:
    root = project(tmp_path, "      memory:\n        type: raw\n")
    crds.write(generate(root))
    path = root / "deploy" / "crds" / "memcached.yaml"
    path.write_text(
        path.read_text().replace(
            "x-kubernetes-preserve-unknown-fields: true\n", "x-kubernetes-int-or-string: true\n", 1
        )
    )
    assert generate(root) == []


def test_a_refused_option_name_stops_generation(tmp_path: Path) -> None:
    root = project(tmp_path, "      hostvars:\n        type: str\n")
    with pytest.raises(ArgumentSpecError, match="option 'hostvars'"):
        generate(root)


def test_an_empty_watches_file_has_nothing_to_generate(tmp_path: Path) -> None:
    (tmp_path / "watches.yaml").write_text("---\n# nothing yet\n")
    notes: list[str] = []
    assert crds.generate(tmp_path / "watches.yaml", reserved=reserved, note=notes.append) == []
    assert "no entries yet" in notes[0]


def test_a_file_of_that_name_holding_something_else_is_not_overwritten(tmp_path: Path) -> None:
    root = project(tmp_path, SIZE)
    (root / "deploy" / "crds" / "memcached.yaml").write_text("---\nkind: ConfigMap\n")
    with pytest.raises(ConfigError, match="holds no CRD of Memcached"):
        generate(root)


def test_the_shipped_crds_keep_their_hand_edits(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "roles", tmp_path / "roles")
    shutil.copytree(ROOT / "deploy" / "crds", tmp_path / "deploy" / "crds")
    shutil.copy(ROOT / "watches.yaml", tmp_path / "watches.yaml")
    assert generate(tmp_path) == []
    foo = yaml.safe_load((tmp_path / "deploy" / "crds" / "foo.yaml").read_text())
    spec = foo["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["deploymentName"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert foo["spec"]["names"]["shortNames"] == ["fo"]


@pytest.mark.parametrize(
    ("kind", "plural"), [("Foo", "foos"), ("Policy", "policies"), ("Gateway", "gateways"), ("Box", "boxes")]
)
def test_plural(kind: str, plural: str) -> None:
    assert crds.plural(kind) == plural
