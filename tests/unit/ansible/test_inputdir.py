"""A run's input: operator-sdk's snake-casing (``naming``), the extra vars (order, unsafe marking), the private dir."""

from __future__ import annotations

import copy
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.inputdir import (
    build_extravars,
    inventory_text,
    mark_unsafe,
    role_playbook,
    write_private_dir,
)
from hybrid_operator.ansible.naming import object_var_name, snake_keys, to_snake

# operator-sdk's paramconv ToSnake / MapToSnake test vectors, plus one of ours (the last).
SNAKE_VECTORS = [
    ("var", "var"),
    ("888", "888"),
    ("k8s_var", "k8s_var"),
    ("_k8s_var", "_k8s_var"),
    ("k8s var", "k8s_var"),
    ("ThisShouldHaveUnderscores", "_this_should_have_underscores"),
    ("sizeK8sBuckets", "size_k8s_buckets"),
    ("_CanYou_Handle_mixedVars", "_can_you_handle_mixed_vars"),
    ("this_should_be_a_noop", "this_should_be_a_noop"),
    ("var_var", "var_var"),
    ("size_k8s_test", "size_k8s_test"),
    ("egressIPs", "egress_ips"),
    ("egressIPsEgress", "egress_ips_egress"),
    ("egressIPsegress", "egress_ips_egress"),
    ("IPsegress", "_ips_egress"),
    ("egressIP", "egress_ip"),
    ("egressIPEgress", "egress_ip_egress"),
    ("egressIPegress", "egress_ip_egress"),
    ("URLegressIPEgressHTTP", "url_egress_ip_egress_http"),
    ("URLsegressIPsEgressHTTPs", "_urls_egress_ips_egress_https"),
    ("THIS_IS_SKIP_NOT_SK_IP", "_this_is_skip_not_sk_ip"),
]


@pytest.mark.parametrize(("name", "snake"), SNAKE_VECTORS)
def test_to_snake(name: str, snake: str) -> None:
    assert to_snake(name) == snake


def test_snake_keys_recurses_through_mappings_and_lists() -> None:
    spec = {"fooBar": {"innerKey": [{"deepKey": "keepThisValue"}, "plainItem"]}, "size": 3}
    assert snake_keys(spec) == {
        "foo_bar": {"inner_key": [{"deep_key": "keepThisValue"}, "plainItem"]},
        "size": 3,
    }


def test_mark_unsafe_wraps_strings_only() -> None:
    value = {"a": "{{ x }}", "b": [1, "y", None, True], "c": {"d": 2.5}}
    assert mark_unsafe(value) == {
        "a": {"__ansible_unsafe": "{{ x }}"},
        "b": [1, {"__ansible_unsafe": "y"}, None, True],
        "c": {"d": 2.5},
    }


@pytest.mark.parametrize(
    ("group", "kind", "name"),
    [
        ("cache.example.com", "Memcached", "_cache_example_com_memcached"),
        ("cert-manager.k8s.io", "Certificate", "_cert_manager_k8s_io_certificate"),
        ("test.hybrid-operator.dev", "Demo", "_test_hybrid_operator_dev_demo"),
        ("", "ConfigMap", "__configmap"),
    ],
)
def test_object_var_name(group: str, kind: str, name: str) -> None:
    assert object_var_name(group, kind) == name


def memcached() -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "web", "namespace": "shop", "generation": 2},
        "spec": {"size": 3, "imageTag": "1.6", "extraArgs": ["-v", "{{ lookup('env', 'HOME') }}"]},
        "status": {"phase": "Ready"},
    }


def extravars(obj: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "group": "cache.example.com",
        "kind": "Memcached",
        "snake_case": True,
        "unsafe": False,
        "watch_vars": {},
        "finalizer_vars": None,
    }
    kwargs.update(overrides)
    return build_extravars(obj, **kwargs)


def test_extravars_plain() -> None:
    obj = memcached()
    params = extravars(obj)
    assert params == {
        "size": 3,
        "image_tag": "1.6",
        "extra_args": ["-v", "{{ lookup('env', 'HOME') }}"],
        "_cache_example_com_memcached": obj,
        "_cache_example_com_memcached_spec": obj["spec"],  # raw: not snake-cased
        "ansible_operator_meta": {"name": "web", "namespace": "shop"},
    }


def test_extravars_keep_keys_without_snake_case() -> None:
    params = extravars(memcached(), snake_case=False)
    assert "imageTag" in params
    assert "image_tag" not in params


def test_cluster_scoped_object_has_empty_namespace() -> None:
    obj = memcached()
    del obj["metadata"]["namespace"]
    assert extravars(obj)["ansible_operator_meta"] == {"name": "web", "namespace": ""}


def test_object_without_spec() -> None:
    obj = memcached()
    del obj["spec"]
    params = extravars(obj)
    assert params["_cache_example_com_memcached_spec"] == {}
    assert set(params) == {
        "_cache_example_com_memcached",
        "_cache_example_com_memcached_spec",
        "ansible_operator_meta",
    }


def test_watch_vars_override_spec_and_finalizer_vars_override_watch_vars() -> None:
    params = extravars(
        memcached(),
        watch_vars={"size": 5, "image_tag": "1.7", "state": "present"},
        finalizer_vars={"state": "absent"},
    )
    assert params["size"] == 5
    assert params["image_tag"] == "1.7"
    assert params["state"] == "absent"


def test_unsafe_wraps_every_string_from_the_object() -> None:
    obj = memcached()
    params = extravars(obj, unsafe=True)
    assert params["image_tag"] == {"__ansible_unsafe": "1.6"}
    assert params["extra_args"] == [
        {"__ansible_unsafe": "-v"},
        {"__ansible_unsafe": "{{ lookup('env', 'HOME') }}"},
    ]
    assert params["size"] == 3
    assert params["ansible_operator_meta"] == {
        "name": {"__ansible_unsafe": "web"},
        "namespace": {"__ansible_unsafe": "shop"},
    }
    whole = params["_cache_example_com_memcached"]
    assert whole["metadata"]["name"] == {"__ansible_unsafe": "web"}
    assert whole["status"]["phase"] == {"__ansible_unsafe": "Ready"}
    assert whole["metadata"]["generation"] == 2
    assert params["_cache_example_com_memcached_spec"]["imageTag"] == {"__ansible_unsafe": "1.6"}


def test_unsafe_leaves_watch_and_finalizer_vars_alone() -> None:
    params = extravars(
        memcached(),
        unsafe=True,
        watch_vars={"image": "memcached:{{ image_tag }}"},
        finalizer_vars={"cleanup": "{{ ansible_operator_meta.name }}-data"},
    )
    assert params["image"] == "memcached:{{ image_tag }}"
    assert params["cleanup"] == "{{ ansible_operator_meta.name }}-data"


def test_mark_unsafe_false_leaves_strings_plain() -> None:
    params = extravars(memcached(), unsafe=False)
    assert params["image_tag"] == "1.6"
    assert params["_cache_example_com_memcached"]["metadata"]["name"] == "web"


@pytest.mark.parametrize("unsafe", [True, False])
def test_the_object_read_is_not_modified(unsafe: bool) -> None:
    obj = memcached()
    before = copy.deepcopy(obj)
    extravars(obj, unsafe=unsafe, watch_vars={"size": 9}, finalizer_vars={"x": 1})
    assert obj == before


def test_inventory_pins_the_operators_python() -> None:
    assert inventory_text() == f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"


def test_role_playbook_runs_the_role_without_facts() -> None:
    text = role_playbook("/opt/roles/memcached")
    assert "hosts: localhost" in text
    assert "gather_facts: false" in text
    assert '- role: "/opt/roles/memcached"' in text


def test_private_dir_is_private(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_private_dir(run_dir, {"size": 3, "secret": {"__ansible_unsafe": "s3cr3t"}})
    extravars_file = run_dir / "env" / "extravars"
    assert json.loads(extravars_file.read_text()) == {"size": 3, "secret": {"__ansible_unsafe": "s3cr3t"}}
    assert (run_dir / "inventory" / "hosts").read_text() == inventory_text()
    assert (run_dir / "project").is_dir()
    assert stat.S_IMODE(extravars_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((run_dir / "env").stat().st_mode) & 0o077 == 0


def test_private_dir_is_never_reused(tmp_path: Path) -> None:
    write_private_dir(tmp_path / "run", {})
    with pytest.raises(FileExistsError):
        write_private_dir(tmp_path / "run", {})


def test_an_inventory_directory_becomes_the_runs_inventory(tmp_path: Path) -> None:
    """ANSIBLE_INVENTORY naming a directory: its contents, group_vars and scripts included, as upstream."""
    source = tmp_path / "inventory"
    (source / "group_vars").mkdir(parents=True)
    (source / "hosts").write_text("[test]\nlocalhost ansible_connection=local\n")
    (source / "group_vars" / "test.yml").write_text("greeting: hello\n")
    (source / "dynamic.py").write_text("#!/bin/sh\necho '{}'\n")
    (source / "dynamic.py").chmod(0o755)
    run_dir = tmp_path / "run"
    write_private_dir(run_dir, {}, inventory=source)
    assert (run_dir / "inventory" / "hosts").read_text() == "[test]\nlocalhost ansible_connection=local\n"
    assert (run_dir / "inventory" / "group_vars" / "test.yml").read_text() == "greeting: hello\n"
    assert stat.S_IMODE((run_dir / "inventory" / "dynamic.py").stat().st_mode) == 0o755
    assert stat.S_IMODE((run_dir / "inventory").stat().st_mode) == 0o700
    (source / "hosts").write_text("[test]\nother\n")  # the run has its own copy
    assert "other" not in (run_dir / "inventory" / "hosts").read_text()


def test_an_inventory_file_becomes_inventory_hosts(tmp_path: Path) -> None:
    source = tmp_path / "hosts.ini"
    source.write_text("[test]\nlocalhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
    write_private_dir(tmp_path / "run", {}, inventory=source)
    assert [p.name for p in (tmp_path / "run" / "inventory").iterdir()] == ["hosts"]
    assert "ansible_python_interpreter=/usr/bin/python3" in (tmp_path / "run" / "inventory" / "hosts").read_text()


def test_a_mounted_configmap_inventory_is_copied_through_its_links(tmp_path: Path) -> None:
    """A ConfigMap volume is links into a hidden timestamped directory; the copy holds the files themselves."""
    source = tmp_path / "mounted"
    (source / "..2026_01_01").mkdir(parents=True)
    (source / "..2026_01_01" / "hosts").write_text("[test]\nlocalhost\n")
    (source / "..data").symlink_to("..2026_01_01")
    (source / "hosts").symlink_to("..data/hosts")
    write_private_dir(tmp_path / "run", {}, inventory=source)
    copied = tmp_path / "run" / "inventory" / "hosts"
    assert not copied.is_symlink()
    assert copied.read_text() == "[test]\nlocalhost\n"


def test_an_inventory_that_went_away_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        write_private_dir(tmp_path / "run", {}, inventory=tmp_path / "gone")
